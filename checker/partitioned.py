"""Breadth-first search with the visited set partitioned by fingerprint among worker processes.

What is modelled
    The same search as :func:`txnspec.checker.explicit.check` (same states, transitions, depth, verdicts and
    counterexample lengths, and the same stops under caps), with no serial merge in the coordinating process.
    Each of ``workers`` forked processes owns the fingerprints ``f`` with ``f % workers`` equal to its number
    (TLC's distributed fingerprint set). Each level:

    1. every worker expands its part of the level in path order and sends each successor's fingerprint and
       path key to the fingerprint's owner, in one batch a level (arrays, no state pickled, through an
       :mod:`~txnspec.checker.exchange`: files in a directory, or sockets between Spark tasks);
    2. every owner keeps, for each fingerprint it has not seen, the candidate with the least path key (the one
       the one-process search meets first) and answers each sender which of its candidates won;
    3. every worker keeps its winning candidates as its part of the next level, in path order, and judges the
       invariants and ``sometimes`` properties on them; the coordinator takes the least path key of each
       property's hits.

    States stay with the worker that generated them (as TLC's distributed workers keep theirs; shipping each
    winner to its owner would pickle half of all states, and pickling a Kafka state costs more than expanding
    it); when the parts of a level are uneven, the largest give states to the smallest, worker to worker.

    A path key is the successor indices from an initial state (two bytes a step); keys of one level have one
    length, and their byte order is the order in which the one-process search meets the states, so a stop at a
    state (a cap, the first violation, every invariant violated) is a cut at its key: each worker counts what
    lies before it. A counterexample is its key re-executed from the initial state.

    The coordinator only sends requests, sums counts and takes the least of a few keys a level;
    ``coordinator_seconds`` in the result is its CPU time, the search's serial part.

Assumptions
    As :mod:`.levels`: fingerprints are ``hash()`` of the state or its representative (forked workers share the
    hash salt; :mod:`.spark_bfs` passes another function where its tasks do not); the model's successor order is
    deterministic; fewer than 65,536 successors a state.

    Long because the workers' four steps and the coordinator's cuts are one protocol, read together.

Left out
    ``leads_to`` properties and the state graph; keeping levels on disk. Coverage counts whole levels when a
    search stops within one.
"""

from __future__ import annotations

import heapq
import multiprocessing
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from txnspec.checker.exchange import Exchange, Files, pack_states, unpack_states
from txnspec.checker.fingerprints import FingerprintSet, collision_probability
from txnspec.checker.levels import _call_all, _hit, _Local, _Remote, run_without_gc
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import (
    STOPPED_ON_VIOLATION,
    CheckResult,
    Counterexample,
    action_kind,
    check_bounds,
    finished_levels,
    kinds_coverage,
    safety_verdicts,
)

INDEX = 2  # bytes of one successor index in a path key
UNEVEN = 64  # parts of a level that differ by more (and by more than a quarter of the mean) are rebalanced
_ALL_VIOLATED = "every invariant is violated (the search stopped early)"
_EXPANDED: tuple[bytes, Any] = (b"", None)  # in place of a state of the level once it is expanded
_SPAN = 1 << 40  # a candidate in decide: sender * _SPAN + position


@dataclass
class _Expanded:
    """A worker's answer to "expand": counts of its part of the level."""

    transitions: int
    kinds: dict[str, int]
    deadlocks: list[bytes]  # keys of expanded states without successors that are not final


@dataclass
class _Accepted:
    """A worker's answer to "accept": its winners and the least key where each property is hit among them."""

    kept: int
    hits: dict[str, bytes] = field(default_factory=dict)


class _Worker:
    """One worker: the fingerprints it owns, its part of the level (path key, state), in key order."""

    def __init__(self, model: Model[Any], canonical: Callable[[Any], Any] | None,
                 properties: Sequence[Property[Any]], me: int, workers: int, directory: str, *,
                 exchange: Exchange | None = None, fingerprint: Callable[[Any], int] = hash) -> None:
        self.model, self.canonical, self.me, self.workers, self.directory = model, canonical, me, workers, directory
        self.exchange = exchange if exchange is not None else Files(directory)  # how batches go between workers
        self.fingerprint = fingerprint  # hash() where every worker shares the salt
        self.properties = {p.name: p for p in properties}
        self.visited = FingerprintSet()
        self.level: list[tuple[bytes, Any]] = []
        # the keys (one size a level, joined) and successor counts of the expanded states, in key order
        self.counted_keys, self.counts = bytearray(), array("I")
        self.sent: list[list[Any]] = []  # per owner: the states whose fingerprints went to it, in order
        self.own: tuple[array[int], list[bytes]] = (array("q"), [])  # candidates this worker owns itself
        self.answer: bytearray = bytearray()

    def fingerprint_of(self, state: Any) -> int:
        """A state's fingerprint as this worker computes it (the coordinator asks for the initial states')."""
        return self.fingerprint(self.canonical(state) if self.canonical is not None else state)

    def load(self, items: list[tuple[int, bytes, Any]]) -> None:
        """The initial states this worker owns (fingerprint, key, state)."""
        for fingerprint, _, _ in items:
            self.visited.add(fingerprint)
        self.level = [(key, state) for _, key, state in items]

    def expand(self, level: int) -> _Expanded:
        next_steps, canonical, is_final = self.model.next_steps, self.canonical, self.model.is_final
        workers, me, fingerprint_of = self.workers, self.me, self.fingerprint
        fingerprints = [array("q") for _ in range(workers)]
        keys: list[list[bytes]] = [[] for _ in range(workers)]
        self.sent = [[] for _ in range(workers)]
        first: set[int] = set()  # fingerprints already sent this level (a later candidate has a greater key)
        labels: dict[Any, int] = {}
        deadlocks: list[bytes] = []
        self.counted_keys, self.counts = bytearray(), array("I")
        transitions = 0
        expanding, self.level = self.level, []
        for position in range(len(expanding)):
            key, state = expanding[position]
            expanding[position] = _EXPANDED  # its successors keep what they share with it; the rest is freed now
            successors = list(next_steps(state))
            transitions += len(successors)
            self.counted_keys += key
            self.counts.append(len(successors))
            if not successors and (is_final is None or not is_final(state)):
                deadlocks.append(key)
            for index, (action, successor) in enumerate(successors):
                labels[action] = labels.get(action, 0) + 1
                fingerprint = fingerprint_of(canonical(successor) if canonical is not None else successor)
                owner = fingerprint % workers
                if owner == me and fingerprint in self.visited:
                    continue
                if fingerprint in first:
                    continue
                first.add(fingerprint)
                fingerprints[owner].append(fingerprint)
                keys[owner].append(key + index.to_bytes(INDEX, "big"))
                self.sent[owner].append(successor)
        for owner in range(workers):
            if owner == me:
                self.own = (fingerprints[owner], keys[owner])
                continue
            with self.exchange.open(level, me, owner, "fp", "wb") as out:
                fingerprints[owner].tofile(out)
            with self.exchange.open(level, me, owner, "key", "wb") as out:
                out.write(b"".join(keys[owner]))
        kinds: dict[str, int] = {}
        for action, n in labels.items():
            kind = action_kind(action)
            kinds[kind] = kinds.get(kind, 0) + n
        return _Expanded(transitions, kinds, deadlocks)

    def decide(self, level: int, key_size: int) -> int:
        """Owner's step: the least key of each new fingerprint wins; each sender is told which of its won."""
        best: dict[int, int] = {}  # fingerprint -> sender * _SPAN + position (an int, not a (key, sender, position))
        batches: list[tuple[array[int], list[bytes]]] = []
        for sender in range(self.workers):
            if sender == self.me:
                batches.append(self.own)
                continue
            fingerprints = array("q")
            with self.exchange.open(level, sender, self.me, "fp", "rb") as source:
                data = source.read()
            fingerprints.frombytes(data)
            with self.exchange.open(level, sender, self.me, "key", "rb") as source:
                blob = source.read()
            batches.append((fingerprints, [blob[i:i + key_size] for i in range(0, len(blob), key_size)]))
        visited = self.visited
        for sender, (fingerprints, keys) in enumerate(batches):
            base = sender * _SPAN
            for position, (fingerprint, key) in enumerate(zip(fingerprints, keys, strict=True)):
                held = best.get(fingerprint)
                if held is None:
                    if fingerprint in visited:
                        continue
                    best[fingerprint] = base + position
                elif key < batches[held // _SPAN][1][held % _SPAN]:
                    best[fingerprint] = base + position
        marks = [bytearray(len(fingerprints)) for fingerprints, _ in batches]
        for fingerprint, held in best.items():
            visited.add(fingerprint)
            marks[held // _SPAN][held % _SPAN] = 1
        for sender, mark in enumerate(marks):
            if sender == self.me:
                self.answer = mark
                continue
            with self.exchange.open(level, sender, self.me, "won", "wb") as out:
                out.write(mark)
        return len(best)

    def accept(self, level: int, pending: Sequence[str], keep: bool) -> _Accepted:
        """Keep this worker's winners (in key order) and judge them."""
        won: list[tuple[bytes, Any]] = []
        for owner in range(self.workers):
            keys: list[bytes] | None
            if owner == self.me:
                mark, keys = bytes(self.answer), self.own[1]
            else:
                with self.exchange.open(level, self.me, owner, "won", "rb") as source:
                    mark = source.read()
                keys = None
            if keys is None:  # the keys of what went to another owner: the states' keys, rebuilt from the file
                with self.exchange.open(level, self.me, owner, "key", "rb") as source:
                    blob = source.read()
                size = len(blob) // max(len(mark), 1)
                keys = [blob[i * size:(i + 1) * size] for i in range(len(mark))]
            states = self.sent[owner]
            won.extend((keys[i], states[i]) for i, flag in enumerate(mark) if flag)
        won.sort(key=lambda item: item[0])
        self.sent = []
        judged = [self.properties[name] for name in pending]
        always = tuple(p.condition for p in judged if p.expectation is Expectation.ALWAYS)
        sometimes = tuple(p.condition for p in judged if p.expectation is Expectation.SOMETIMES)
        hits: dict[str, bytes] = {}
        for key, state in won:  # as levels.py: one pass over the pending conditions, a closer look on a hit
            if any(not condition(state) for condition in always) or any(condition(state) for condition in sometimes):
                for prop in judged:
                    if prop.name not in hits and _hit(prop, state):
                        hits[prop.name] = key
                judged = [p for p in judged if p.name not in hits]
                always = tuple(p.condition for p in judged if p.expectation is Expectation.ALWAYS)
                sometimes = tuple(p.condition for p in judged if p.expectation is Expectation.SOMETIMES)
                if not judged:
                    break
        # the last level a depth bound reaches is never expanded: its keys are kept (a stop may cut it), not its states
        self.level = won if keep else [(key, None) for key, _ in won]
        return _Accepted(len(won), hits)

    def count_before(self, cut: bytes, inclusive: bool) -> tuple[int, int]:
        """A stop at key ``cut`` (the state the search stopped at, or, not ``inclusive``, the first state a cap
        left out): the states of the new level before it are kept and counted, and the successors of the expanded
        states up to its parent."""
        parent = cut[:-INDEX]
        self.level = [(key, state) for key, state in self.level if key < cut or (inclusive and key == cut)]
        size = len(parent)
        keys = self.counted_keys
        return len(self.level), sum(n for i, n in enumerate(self.counts) if keys[i * size:(i + 1) * size] <= parent)

    def keys(self) -> list[bytes]:
        return [key for key, _ in self.level]

    def give(self, level: int, transfers: list[tuple[int, int]]) -> None:
        """Move ``n`` of this worker's states to each ``(receiver, n)`` (their keys and
        :mod:`~txnspec.checker.state_codec` bytes, through the exchange)."""
        for receiver, n in transfers:
            moving, self.level = self.level[len(self.level) - n:], self.level[:len(self.level) - n]
            with self.exchange.open(level, self.me, receiver, "move", "wb") as out:
                out.write(pack_states(moving))

    def take(self, level: int, donors: list[int]) -> None:
        for donor in donors:
            with self.exchange.open(level, donor, self.me, "move", "rb") as source:
                self.level.extend(unpack_states(source.read()))
        self.level.sort(key=lambda item: item[0])  # candidates must be met in key order (see expand)

    def close(self) -> None:
        self.level = []


def _owner(fingerprint: int, workers: int) -> int:
    return fingerprint % workers


def check_partitioned(model: Model[Any], *, properties: Sequence[str] | None = None,
                      max_states: int | None = None, max_depth: int | None = None, workers: int = 2,
                      symmetry: bool = True, check_deadlock: bool = True, stop_on_violation: bool = False,
                      directory: str | None = None) -> CheckResult:
    """Explore ``model`` breadth first with the visited set partitioned among ``workers`` forked processes (1: in
    this process). Same parameters and result as :func:`txnspec.checker.levels.check_levels` (without progress);
    the result's ``coordinator_seconds`` is the CPU time of this process, the search's serial part.

    >>> from txnspec.checker.model import Model, Property
    >>> counter = Model("counter", lambda: [0], lambda n: [("inc", n + 1), ("twice", 2 * n)] if n < 9 else [],
    ...                 properties=[Property.always("small", lambda n: n < 100)], is_final=lambda n: n >= 9)
    >>> result = check_partitioned(counter, workers=2)
    >>> (result.verdict_text, result.states, result.store)
    ('holds', 14, 'fingerprints, partitioned over 2 workers')
    """
    check_bounds(workers=workers, max_states=max_states, max_depth=max_depth)
    selected = model.safety_properties(properties, "the partitioned search")
    selected.sort(key=lambda p: p.expectation is not Expectation.ALWAYS)  # explicit.py's order
    with tempfile.TemporaryDirectory(prefix="txnspec-partitioned-", dir=directory) as scratch:
        search = _Search(model, selected, model.symmetry if symmetry else None, workers, scratch,
                         max_states or sys.maxsize, max_depth or sys.maxsize, stop_on_violation)
        run_without_gc(search)
        return search.result(check_deadlock)


class _Search:
    def __init__(self, model: Model[Any], selected: list[Property[Any]], canonical: Callable[[Any], Any] | None,
                 workers: int, scratch: str, state_cap: int, depth_cap: int, stop_on_violation: bool) -> None:
        self.model, self.properties, self.canonical = model, selected, canonical
        self.state_cap, self.depth_cap, self.stop_on_violation = state_cap, depth_cap, stop_on_violation
        self.workers_count = workers
        self.first_hits: dict[str, tuple[int, bytes]] = {}  # property -> (level, key)
        self.deadlocks: list[tuple[int, bytes]] = []
        self.kinds: dict[str, int] = {}
        self.sizes: list[int] = []
        self.states = self.transitions = 0
        self.stop_reason: str | None = None
        self.depth_capped = False
        self.seconds = self.cpu = 0.0
        self.workers = self._start_workers(scratch)

    def _start_workers(self, scratch: str) -> list[Any]:
        """Handles on the workers (``send(request, *args)``, ``receive()``, ``close()``): forked processes here
        (:mod:`.spark_bfs` connects to Spark tasks instead)."""
        handles = [_Worker(self.model, self.canonical, self.properties, me, self.workers_count, scratch)
                   for me in range(self.workers_count)]
        if self.workers_count == 1:
            return [_Local(handles[0])]  # type: ignore[arg-type]
        context = multiprocessing.get_context("fork")
        return [_Remote(handle, context) for handle in handles]  # type: ignore[arg-type]

    def _fingerprint(self, state: Any) -> int:
        """An initial state's fingerprint, as the workers compute theirs (forked: the same salt)."""
        return hash(self.canonical(state) if self.canonical is not None else state)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()

    @property
    def pending(self) -> list[str]:
        return [p.name for p in self.properties if p.name not in self.first_hits]

    def _stop_key(self, level: int) -> tuple[bytes, str] | None:
        """Where the one-process search stops in ``level``, by its judge: the first violation (with
        stop_on_violation), or the state where every invariant is violated and every witness found."""
        always = [p for p in self.properties if p.expectation is Expectation.ALWAYS]
        here = {name: key for name, (found, key) in self.first_hits.items() if found == level}
        if self.stop_on_violation:
            violations = [here[p.name] for p in always if p.name in here]
            if violations:
                return min(violations), STOPPED_ON_VIOLATION
        if always and not self.pending and here:
            return max(here.values()), _ALL_VIOLATED
        return None

    def run(self) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            self._initial_level()
            depth = 0
            while self.sizes[-1] and self.stop_reason is None:
                if depth >= self.depth_cap:
                    self.stop_reason = f"the depth cap ({self.depth_cap}) was reached"
                    self.depth_capped = True
                    break
                self._next_level(depth)
                depth += 1
        finally:
            self.seconds = time.perf_counter() - started
            self.cpu = time.process_time() - cpu

    def _initial_level(self) -> None:
        parts: list[list[tuple[int, bytes, Any]]] = [[] for _ in self.workers]
        seen: set[int] = set()
        kept = 0
        for index, state in enumerate(self.model.init_states()):
            fingerprint = self._fingerprint(state)
            if fingerprint in seen:
                continue
            if kept >= self.state_cap:
                self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
                break
            seen.add(fingerprint)
            key = index.to_bytes(INDEX, "big")
            parts[_owner(fingerprint, len(self.workers))].append((fingerprint, key, state))
            kept += 1
            for prop in self.properties:
                if prop.name not in self.first_hits and _hit(prop, state):
                    self.first_hits[prop.name] = (0, key)
            stop = self._stop_key(0)
            if stop is not None:
                self.stop_reason = stop[1]
                break
        _call_all(self.workers, "load", [(part,) for part in parts])
        self.sizes.append(kept)
        self.states = kept

    def _next_level(self, depth: int) -> None:
        level = depth + 1
        key_size = INDEX * (level + 1)
        everyone = [()] * len(self.workers)
        expanded: list[_Expanded] = _call_all(self.workers, "expand", [(depth,)] * len(self.workers))
        new = sum(_call_all(self.workers, "decide", [(depth, key_size)] * len(self.workers)))
        keep = level < self.depth_cap
        pending = self.pending
        accepted: list[_Accepted] = _call_all(self.workers, "accept", [(depth, pending, keep)] * len(self.workers))
        for answer in accepted:
            for name, key in answer.hits.items():
                if name not in self.first_hits or (level, key) < self.first_hits[name]:
                    self.first_hits[name] = (level, key)
        for answer_ in expanded:
            for kind, n in answer_.kinds.items():
                self.kinds[kind] = self.kinds.get(kind, 0) + n
        cut: bytes | None = None
        inclusive = False
        room = self.state_cap - self.states
        if new > room:  # the first state the one-process search could not store: the (room + 1)-th
            keys = heapq.merge(*_call_all(self.workers, "keys", everyone))
            cut = next(k for i, k in enumerate(keys) if i == room)
            self.first_hits = {n: hit for n, hit in self.first_hits.items() if hit[0] < level or hit[1] < cut}
            self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
        stop = self._stop_key(level)
        if stop is not None and (cut is None or stop[0] < cut):
            (cut, self.stop_reason), inclusive = stop, True
            self.first_hits = {n: hit for n, hit in self.first_hits.items() if hit[0] < level or hit[1] <= cut}
        if cut is None:
            self.transitions += sum(e.transitions for e in expanded)
            self.deadlocks.extend((depth, key) for e in expanded for key in e.deadlocks)
            self.sizes.append(new)
            self.states += new
            if keep and len(self.workers) > 1:
                self._rebalance(depth, [a.kept for a in accepted])
            return
        counted = _call_all(self.workers, "count_before", [(cut, inclusive)] * len(self.workers))
        stored = sum(c[0] for c in counted)
        self.transitions += sum(c[1] for c in counted)
        parent = cut[:-INDEX]
        self.deadlocks.extend((depth, key) for e in expanded for key in e.deadlocks if key <= parent)
        self.sizes.append(stored)
        self.states += stored

    def _rebalance(self, depth: int, sizes: list[int]) -> None:
        """States stay with the worker that generated them (shipping every winner to its owner would pickle half of
        all states); when the parts are uneven (the first levels all start in one worker), the largest give to the
        smallest, worker to worker."""
        total, count = sum(sizes), len(sizes)
        if max(sizes) - min(sizes) <= max(UNEVEN, total // (4 * count)):
            return
        targets = [total // count + (i < total % count) for i in range(count)]
        surplus = [(i, sizes[i] - targets[i]) for i in range(count) if sizes[i] > targets[i]]
        deficit = [(i, targets[i] - sizes[i]) for i in range(count) if sizes[i] < targets[i]]
        gives: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        takes: list[list[int]] = [[] for _ in range(count)]
        while surplus and deficit:
            (donor, extra), (receiver, missing) = surplus[0], deficit[0]
            n = min(extra, missing)
            gives[donor].append((receiver, n))
            takes[receiver].append(donor)
            surplus[0], deficit[0] = (donor, extra - n), (receiver, missing - n)
            if extra == n:
                surplus.pop(0)
            if missing == n:
                deficit.pop(0)
        _call_all(self.workers, "give", [(depth, g) for g in gives])
        _call_all(self.workers, "take", [(depth, t) for t in takes])

    def _path(self, key: bytes) -> tuple[tuple[Any, Any], ...]:
        indices = [int.from_bytes(key[i:i + INDEX], "big") for i in range(0, len(key), INDEX)]
        state = list(self.model.init_states())[indices[0]]
        steps: list[tuple[Any, Any]] = [(None, state)]
        for index in indices[1:]:
            action, state = list(self.model.next_steps(state))[index]
            steps.append((action, state))
        return tuple(steps)

    def result(self, check_deadlock: bool) -> CheckResult:
        complete = self.stop_reason is None
        verdicts = safety_verdicts(self.properties, self.first_hits.get, lambda hit: self._path(hit[1]), complete)
        deadlocks = sorted(self.deadlocks) if check_deadlock else []
        coverage, never_taken = kinds_coverage(self.model, self.kinds)
        depth = len(self.sizes) - 1 - (not self.sizes[-1])
        return CheckResult(
            model_name=self.model.name, states=self.states, transitions=self.transitions, depth=max(depth, 0),
            seconds=self.seconds, complete=complete, verdicts=verdicts,
            deadlock=Counterexample("deadlock", self._path(deadlocks[0][1])) if deadlocks else None,
            deadlock_count=len(deadlocks), coverage=coverage, never_taken=never_taken,
            describe_state=self.model.describe_state,
            stop_reason=self.stop_reason, symmetry=self.canonical is not None,
            store=f"fingerprints, partitioned over {self.workers_count} workers",
            collision_probability=collision_probability(self.states),
            level_sizes=finished_levels(self.sizes, self.stop_reason is None or self.depth_capped),
            coordinator_seconds=self.cpu)
