"""What the executors run for :mod:`txnspec.checker.spark_bfs`: a level's partitions, expanded and merged.

What is modelled
    A partition of a level holds, in this order, the visited set of the fingerprints it owns (an
    ``array('q')`` as bytes, tag ``VISITED``), the level's summary for it (``SUMMARY``: how many new states,
    each pending property's first hit, the counts of the expansion that made it), then its new states as
    ``(fingerprint, path key, state, parts)`` pickled in chunks (``STATES``), in key order; ``parts`` are the
    digests of the state's components (:meth:`~txnspec.checker.stable_fingerprint.Fingerprinter.parts`), so
    that fingerprinting its successors in the next level does not encode again what they share with it.
    :func:`expand` turns a partition into candidates (the least key per fingerprint), pickled together for
    each partition that owns them (``(CANDIDATES, target, source, start)``), and one ``(STATS, source)``
    record of counts, and
    :func:`merge` turns partition ``i`` of the level and the candidates shuffled to ``i`` into partition ``i``
    of the next level.

Assumes
    PySpark reuses a Python worker only when its task read all of its input, so every function here reads
    every record (a reader that wants the set or the summary passes the states over as bytes); the model is
    built once per Python worker and run (:func:`load`). States form no cycles: the cyclic garbage collector
    is paused in a task (:func:`task`).

Left out
    Everything the driver decides (where to stop, the result): :mod:`txnspec.checker.spark_bfs`.
"""

from __future__ import annotations

import gc
import pickle
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import action_kind
from txnspec.checker.stable_fingerprint import Fingerprinter

ModelFactory = Callable[[], Model[Any]]

INDEX = 4  # bytes of one successor index in a path key
CHUNK = 2048  # states pickled together in a level's partition
VISITED, SUMMARY, STATES = "visited", "summary", "states"  # tags of a level's records
CANDIDATES, STATS = "candidates", "stats"  # tags of the records shuffled between two levels
Hit = tuple[bytes, int]  # (path key, fingerprint) of a state


@dataclass(frozen=True)
class Plan:
    """What every task needs: the model's factory and the run's choices (shipped with each task)."""

    token: str  # names this run, so that an executor's Python worker builds the model once
    factory: ModelFactory
    names: tuple[str, ...]
    symmetry: bool
    partitions: int


@dataclass
class Counts:
    """A partition's expansion: successors generated, per action kind, and states without successors."""

    transitions: int = 0
    kinds: dict[str, int] | None = None
    deadlocks: int = 0
    first_deadlock: Hit | None = None

    def add(self, other: Counts) -> None:
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
class Summary:
    """A partition's part of a new level: how many new states, the first hit of each property, the counts."""

    new: int
    hits: dict[str, Hit]
    counts: Counts


class Loaded:
    """The model as an executor (or the driver) uses it."""

    def __init__(self, plan: Plan, model: Model[Any] | None = None) -> None:
        self.model = model if model is not None else plan.factory()
        self.properties = {p.name: p for p in self.model.properties if p.name in plan.names}
        canonical = self.model.symmetry if plan.symmetry else None
        # states arrive unpickled: their sub-states are shared within a chunk, never with an earlier task's
        self.fingerprinter = Fingerprinter(by_identity=True)
        fingerprint = self.fingerprinter.fingerprint
        self.fingerprint: Callable[[Any], int] = fingerprint if canonical is None \
            else (lambda state: fingerprint(canonical(state)))


_LOADED: dict[str, Loaded] = {}


def load(plan: Plan) -> Loaded:
    found = _LOADED.get(plan.token)
    if found is None:
        _LOADED.clear()  # one run at a time in a Python worker
        found = _LOADED[plan.token] = Loaded(plan)
    return found


def owner(key: Any) -> int:
    """The partition function: a state's fingerprint; for a shuffled record, the partition it is for."""
    return key if type(key) is int else key[1]


def hit(prop: Property[Any], state: Any) -> bool:
    """An ``always`` property is hit where it fails, a ``sometimes`` property where it holds."""
    holds = prop.condition(state)
    return not holds if prop.expectation is Expectation.ALWAYS else bool(holds)


def key_of(index: int) -> bytes:
    return index.to_bytes(INDEX, "big")


def task(function: Callable[..., Iterator[Any]], *args: Any) -> Iterator[Any]:
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


def states_of(items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[int, bytes, Any, Any]]:
    """The ``(fingerprint, key, state, parts)`` records of a level's partition (reading every record, see tagged)."""
    for tag, value in items:
        if tag == STATES:
            yield from pickle.loads(value)


def pack(records: list[tuple[int, bytes, Any, Any]]) -> Iterator[tuple[str, bytes]]:
    """States as pickled chunks: sub-states shared within a chunk are written once, and a reader that wants
    only the set or the summary skips them as bytes."""
    for start in range(0, len(records), CHUNK):
        yield STATES, pickle.dumps(records[start:start + CHUNK], protocol=pickle.HIGHEST_PROTOCOL)


def expand(plan: Plan, partition: int, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 1: the successors of a partition's states, the least key per fingerprint, and the counts. The
    candidates for each partition are pickled together here (C pickle; sub-states shared by siblings written
    once), so that PySpark's serializer only moves bytes."""
    loaded = load(plan)
    loaded.fingerprinter.clear()
    next_steps, is_final, fingerprint = loaded.model.next_steps, loaded.model.is_final, loaded.fingerprint
    seed = loaded.fingerprinter.seed if not plan.symmetry else None
    best: dict[int, tuple[bytes, Any]] = {}
    labels: dict[Any, int] = {}
    counts = Counts()
    for fp, key, state, parts in states_of(items):
        if seed is not None:
            seed(state, parts)
        successors = next_steps(state)
        if type(successors) is not list:
            successors = list(successors)
        counts.transitions += len(successors)
        if not successors:
            if is_final is None or not is_final(state):
                counts.add(Counts(deadlocks=1, first_deadlock=(key, fp)))
            continue
        for index, (action, successor) in enumerate(successors):
            labels[action] = labels.get(action, 0) + 1
            target = fingerprint(successor)
            path = key + key_of(index)
            held = best.get(target)
            if held is None or path < held[0]:
                best[target] = (path, successor)
    # the digests of each kept successor's components travel with it: its own successors share most of them
    parts_of = loaded.fingerprinter.parts if seed is not None else (lambda _: None)
    kept = [(fp, key, state, parts_of(state)) for fp, (key, state) in best.items()]
    loaded.fingerprinter.clear()
    kinds: dict[str, int] = {}
    for label, n in labels.items():
        kind = action_kind(label)
        kinds[kind] = kinds.get(kind, 0) + n
    counts.kinds = kinds
    yield (STATS, partition), counts
    shares: list[list[tuple[int, bytes, Any, Any]]] = [[] for _ in range(plan.partitions)]
    for record in kept:
        shares[owner(record[0]) % plan.partitions].append(record)
    for target, share in enumerate(shares):
        for start in range(0, len(share), CHUNK):
            blob = pickle.dumps(share[start:start + CHUNK], protocol=pickle.HIGHEST_PROTOCOL)
            yield (CANDIDATES, target, partition, start), blob


def merge(plan: Plan, pending: tuple[str, ...], items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 2: a partition's visited set meets its candidates; the new states, judged, make the next level."""
    loaded = load(plan)
    visited: set[int] | None = None
    best: dict[int, tuple[bytes, Any, Any]] = {}
    counts = Counts()
    for tag, value in items:
        if tag == VISITED:
            visited = set(array("q", value))
        elif type(tag) is tuple and tag[0] == CANDIDATES:
            for fp, key, state, parts in pickle.loads(value):
                held = best.get(fp)
                if held is None or key < held[0]:
                    best[fp] = (key, state, parts)
        elif type(tag) is tuple:
            counts.add(value)
    if visited is None:
        raise RuntimeError("a partition of the candidates met no partition of the visited set: Spark did not "
                           "co-partition them")
    new = sorted(((key, fp, state, parts) for fp, (key, state, parts) in best.items() if fp not in visited),
                 key=lambda r: r[0])
    checks = [loaded.properties[name] for name in pending]
    hits: dict[str, Hit] = {}
    for key, fp, state, _ in new:
        visited.add(fp)
        if checks and any(hit(p, state) for p in checks):
            hits.update((p.name, (key, fp)) for p in checks if hit(p, state))
            checks = [p for p in checks if p.name not in hits]
    yield VISITED, array("q", visited).tobytes()
    yield SUMMARY, Summary(len(new), hits, counts)
    yield from pack([(fp, key, state, parts) for key, fp, state, parts in new])


def first_level(items: Iterable[tuple[int, tuple[bytes, Any]]]) -> Iterator[tuple[Any, Any]]:
    kept = sorted(((fp, key, state, None) for fp, (key, state) in items), key=lambda r: r[1])
    yield VISITED, array("q", (fp for fp, _, _, _ in kept)).tobytes()
    yield SUMMARY, None
    yield from pack(kept)


def tagged(tag: str, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """The records tagged ``tag``. Every record is read: a Python worker that leaves input unread is not
    reused (PySpark), and the next task would start a new one and build the model again."""
    return (item for item in items if item[0] == tag)


def keys(items: Iterable[tuple[Any, Any]]) -> Iterator[bytes]:
    return (key for _, key, _, _ in states_of(items))


def successor_counts(plan: Plan, last: bytes, items: Iterable[tuple[Any, Any]]) -> Iterator[int]:
    """How many successors the states up to key ``last`` have (the transitions before a stop within a level)."""
    next_steps = load(plan).model.next_steps
    for _, key, state, _ in states_of(items):
        if key <= last:
            yield sum(1 for _ in next_steps(state))
