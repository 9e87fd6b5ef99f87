"""What the executors run for :mod:`txnspec.checker.spark_bfs`: a level's partitions, expanded and merged.

What is modelled
    A partition of a level holds, in this order, the visited set of the fingerprints it owns (an
    ``array('q')`` as bytes, tag ``VISITED``: the previous level's set with this level's new fingerprints
    appended), the level's summary for it (``SUMMARY``: how many new states, each pending property's first hit,
    the counts of the expansion that made it), then its new states in groups (``GROUP``): a
    :class:`~txnspec.checker.state_codec.Batch` of states (a table of distinct values per field, rows of
    indices), their fingerprints (``array('q')``) and their path keys (of one length), as a :data:`Group`.
    :func:`expand` turns a partition into candidates (the least key per fingerprint), encoded in groups for
    each partition that owns them (``(CANDIDATES, target, source, start)``), and one ``(STATS, source)``
    record of counts, and :func:`merge` turns partition ``i`` of the level and the candidates shuffled to
    ``i`` into partition ``i`` of the next level: it decides from fingerprints and keys alone which candidates
    are new, decodes only those (the other rows of a batch are skipped), judges the pending properties on
    them and encodes them afresh, so the next level's tables hold no loser's values. A state is thus decoded
    twice: to be judged where its fingerprint's owner keeps it, and to be expanded a level later.

Assumes
    PySpark reuses a Python worker only when its task read all of its input, so every function here reads
    every record (a reader that wants the set or the summary passes the groups over as bytes); the model is
    built once per Python worker and run (:func:`load`), and its fingerprint memory lives as long (keyed by
    value: the successors of a level share parts with the states of the levels before). States form no cycles:
    the cyclic garbage collector is paused in a task (:func:`task`).

Left out
    Everything the driver decides (where to stop, the result): :mod:`txnspec.checker.spark_bfs`.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import action_kind
from txnspec.checker.stable_fingerprint import Fingerprinter
from txnspec.checker.state_codec import Batch, encode

ModelFactory = Callable[[], Model[Any]]

INDEX = 4  # bytes of one successor index in a path key
CHUNK = 4096  # states encoded together (one batch of tables)
VISITED, SUMMARY, GROUP = "visited", "summary", "group"  # tags of a level's records
CANDIDATES, STATS = "candidates", "stats"  # tags of the records shuffled between two levels
Hit = tuple[bytes, int]  # (path key, fingerprint) of a state
Group = tuple[Batch, bytes, bytes]
"""Encoded states, their fingerprints (``array('q')`` bytes) and their path keys (joined, of one length)."""


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
        # keyed by value: decoded states share their parts through the model's own unpickling (interning)
        self.fingerprinter = Fingerprinter()
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
    spec's memos) each time decoding allocates enough: a level ran ten times slower with it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield from function(*args)
    finally:
        if collecting:
            gc.enable()


def group_of(records: list[tuple[int, bytes, Any]]) -> Group:
    """``(fingerprint, key, state)`` records (keys of one length) as a group."""
    return (encode([state for _, _, state in records]), array("q", [fp for fp, _, _ in records]).tobytes(),
            b"".join([key for _, key, _ in records]))


def groups_of(records: list[tuple[int, bytes, Any]]) -> Iterator[Group]:
    for start in range(0, len(records), CHUNK):
        yield group_of(records[start:start + CHUNK])


def keys_of(group: Group) -> list[bytes]:
    _, fps, keys = group
    n = len(fps) // 8
    size = len(keys) // n if n else 0
    return [keys[i * size:(i + 1) * size] for i in range(n)]


def records_of(items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[int, bytes, Any]]:
    """The ``(fingerprint, key, state)`` records of a level's partition (reading every record, see tagged)."""
    for tag, value in items:
        if tag == GROUP:
            batch, fps, _ = value
            yield from zip(array("q", fps), keys_of(value), batch.decode(), strict=True)


def expand(plan: Plan, partition: int, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 1: the successors of a partition's states, the least key per fingerprint, and the counts. The
    candidates for each partition are encoded together here, so that PySpark's serializer only moves bytes."""
    loaded = load(plan)
    next_steps, is_final, fingerprint = loaded.model.next_steps, loaded.model.is_final, loaded.fingerprint
    best: dict[int, tuple[bytes, Any]] = {}
    labels: dict[Any, int] = {}
    counts = Counts()
    for fp, key, state in records_of(items):
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
    kinds: dict[str, int] = {}
    for label, n in labels.items():
        kind = action_kind(label)
        kinds[kind] = kinds.get(kind, 0) + n
    counts.kinds = kinds
    yield (STATS, partition), counts
    shares: list[list[tuple[int, bytes, Any]]] = [[] for _ in range(plan.partitions)]
    for fp, (key, state) in best.items():
        shares[owner(fp) % plan.partitions].append((fp, key, state))
    for target, share in enumerate(shares):
        for start in range(0, len(share), CHUNK):
            yield (CANDIDATES, target, partition, start), group_of(share[start:start + CHUNK])


def merge(plan: Plan, pending: tuple[str, ...], items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Step 2: a partition's visited set meets its candidates; the new states, judged, make the next level."""
    loaded = load(plan)
    visited_bytes: bytes | None = None
    groups: list[Group] = []
    counts = Counts()
    for tag, value in items:
        if tag == VISITED:
            visited_bytes = value
        elif type(tag) is tuple and tag[0] == CANDIDATES:
            groups.append(value)
        elif type(tag) is tuple:
            counts.add(value)
    if visited_bytes is None:
        raise RuntimeError("a partition of the candidates met no partition of the visited set: Spark did not "
                           "co-partition them")
    visited = set(array("q", visited_bytes))
    best: dict[int, tuple[bytes, int, int]] = {}  # fingerprint -> (key, group, position)
    for g, group in enumerate(groups):
        for position, (fp, key) in enumerate(zip(array("q", group[1]), keys_of(group), strict=True)):
            if fp in visited:
                continue
            held = best.get(fp)
            if held is None or key < held[0]:
                best[fp] = (key, g, position)
    chosen: list[list[int]] = [[] for _ in groups]
    for _, g, position in best.values():
        chosen[g].append(position)
    checks = [loaded.properties[name] for name in pending]
    always = tuple(p.condition for p in checks if p.expectation is Expectation.ALWAYS)
    sometimes = tuple(p.condition for p in checks if p.expectation is Expectation.SOMETIMES)
    hits: dict[str, Hit] = {}
    winners: list[tuple[int, bytes, Any]] = []
    for g, positions in enumerate(chosen):
        if not positions:
            continue
        positions.sort()
        fps, keys = array("q", groups[g][1]), keys_of(groups[g])
        for position, state in zip(positions, groups[g][0].decode(positions), strict=True):
            fp, key = fps[position], keys[position]
            winners.append((fp, key, state))
            # as levels.py: one pass over the conditions, a closer look on a hit
            if checks and (any(not condition(state) for condition in always)
                           or any(condition(state) for condition in sometimes)):
                for prop in checks:  # a hit counts only where it gives a property a lesser key
                    found = hits.get(prop.name)
                    if (found is None or key < found[0]) and hit(prop, state):
                        hits[prop.name] = (key, fp)
    yield VISITED, visited_bytes + array("q", best).tobytes()
    yield SUMMARY, Summary(len(best), hits, counts)
    # encoded afresh: a candidate group's tables also hold the values of its losers, which the next level
    # would decode for nothing
    for group in groups_of(winners):
        yield GROUP, group


def first_level(items: Iterable[tuple[int, tuple[bytes, Any]]]) -> Iterator[tuple[Any, Any]]:
    kept = sorted(((fp, key, state) for fp, (key, state) in items), key=lambda r: r[1])
    yield VISITED, array("q", (fp for fp, _, _ in kept)).tobytes()
    yield SUMMARY, None
    for group in groups_of(kept):
        yield GROUP, group


def tagged(tag: str, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """The records tagged ``tag``. Every record is read: a Python worker that leaves input unread is not
    reused (PySpark), and the next task would start a new one and build the model again."""
    return (item for item in items if item[0] == tag)


def keys(items: Iterable[tuple[Any, Any]]) -> Iterator[bytes]:
    """The path keys of a level's partition (no state decoded)."""
    for tag, value in items:
        if tag == GROUP:
            yield from keys_of(value)


def successor_counts(plan: Plan, last: bytes, items: Iterable[tuple[Any, Any]]) -> Iterator[int]:
    """How many successors the states up to key ``last`` have (the transitions before a stop within a level)."""
    next_steps = load(plan).model.next_steps
    for _, key, state in records_of(items):
        if key <= last:
            yield sum(1 for _ in next_steps(state))
