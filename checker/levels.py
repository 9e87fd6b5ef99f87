"""Breadth-first search level by level over fingerprints, in one process or in several.

What is modelled
    The same search as :func:`txnspec.checker.explicit.check` (same states, transitions, verdicts and
    shortest counterexamples), organised for size: a level's states are expanded by ``workers`` shards
    (forked processes, or one in process), each holding a contiguous part of the level; the coordinator
    keeps only a :class:`~txnspec.checker.fingerprints.FingerprintSet` of every state seen and, per level, the
    fingerprints and parents of its states (in files). Each level:

    1. every shard expands its states in order and answers the fingerprints of their successors (first
       occurrences, with the parent's position) and how many successors each state had;
    2. the coordinator walks the shards' answers in shard order, as the one-process search would, and keeps
       the fingerprints not seen before; it answers each shard which of its successors are new;
    3. each shard keeps its new states for the next level (on disk) and judges the invariants and
       ``sometimes`` properties on them; the coordinator turns the first local hit of each into the position
       the one-process search would give it, so the first violation found is the same shortest one;
    4. if the shards' next levels are uneven, states move between neighbours, keeping their order.

    The last level a depth bound lets the search reach is never expanded, so it is never kept: the shards judge
    its candidates as they expand the level before (step 3 moves into step 1) and drop them. A depth-bounded
    run of a state space still growing, whose last level is its widest, holds only fingerprints of it.

    The shards and their workers are :mod:`txnspec.checker.shards`; this module is the coordinator.

    A counterexample is rebuilt from the parent pointers: the fingerprints back to an initial state, then
    the path re-executed forward, taking at each step the first successor with the next fingerprint (the
    one-process search's step, since it records the first discovery).

Assumptions
    Fingerprints are ``hash()`` of the state (or of its symmetry representative); forked workers share the
    coordinator's string-hash salt. A collision (two states with one fingerprint) would make the search skip
    a state: the result reports its chance. Caps and early stops cut the level at the state where the
    one-process search would have stopped, so the counts still agree.

Long because the coordinator's search (:class:`_LevelSearch`) is one algorithm whose steps (expand, merge in
shard order, judge, rebalance, rebuild a path) share its state; split, they would pass that state around.

Left out
    ``leads_to`` properties and the state graph (they need every edge: use the exact engine); coverage is
    counted for whole levels when a search stops within one.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from txnspec.checker.fingerprints import FingerprintSet, collision_probability
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
from txnspec.checker.shards import (
    _call_all,
    _Expansion,
    _hit,
    _Judgement,
    _Local,
    _Remote,
    _resident_bytes,
    _Shard,
    run_without_gc,
)

MemoryProgress = Callable[[int, int, float, int], None]


"""Called about once a second with ``(distinct states, depth, states per second, resident bytes)``."""


def _judged_in_expansion(expansions: Sequence[_Expansion], marks: Sequence[bytes]) -> list[_Judgement]:
    """The judgements of a last level, from the hits its shards found while expanding. A shard's first hit that
    is not new (not marked) was kept first by an earlier shard, which then has a hit at or before it; or it is
    past the state cap. Either way it is not the level's first."""
    judgements = []
    for expansion, mark in zip(expansions, marks, strict=True):
        hits = {name: mark[:candidate].count(1) for name, candidate in expansion.hits.items() if mark[candidate]}
        judgements.append(_Judgement(mark.count(1), hits))
    return judgements


@dataclass
class _Levels:
    """Per level, the fingerprints and parent positions of its states (in files: the parent pointers)."""

    directory: str
    sizes: list[int] = field(default_factory=list)

    def _path(self, level: int, what: str) -> str:
        return os.path.join(self.directory, f"level-{level}.{what}")

    def write(self, fingerprints: array[int], parents: array[int]) -> None:
        level = len(self.sizes)
        with open(self._path(level, "fp"), "wb") as out:
            fingerprints.tofile(out)
        with open(self._path(level, "parent"), "wb") as out:
            parents.tofile(out)
        self.sizes.append(len(fingerprints))

    def read(self, level: int, what: str) -> array[int]:
        values = array("q" if what == "fp" else "i")
        with open(self._path(level, what), "rb") as src:
            values.fromfile(src, self.sizes[level])
        return values

    def path_fingerprints(self, level: int, position: int) -> list[int]:
        """The fingerprints from an initial state to the state at ``(level, position)``."""
        found = []
        while level >= 0:
            found.append(self.read(level, "fp")[position])
            position = self.read(level, "parent")[position] if level else -1
            level -= 1
        found.reverse()
        return found


def check_levels(model: Model[Any], *, properties: Sequence[str] | None = None, max_states: int | None = None,
                 max_depth: int | None = None, workers: int = 1, symmetry: bool = True, check_deadlock: bool = True,
                 progress: bool | MemoryProgress = False, directory: str | None = None,
                 stop_on_violation: bool = False) -> CheckResult:
    """Explore ``model`` breadth first over fingerprints with ``workers`` processes (1: in this process).

    Same parameters and result as :func:`txnspec.checker.explicit.check`, without ``leads_to`` properties
    (a ``ValueError`` names them) or the state graph. The result's ``store`` says "fingerprints" and
    ``collision_probability`` gives the chance that a fingerprint collision hid a state.

    >>> from txnspec.checker.model import Model, Property
    >>> counter = Model("counter", lambda: [0], lambda n: [("inc", n + 1), ("twice", 2 * n)] if n < 9 else [],
    ...                 properties=[Property.always("small", lambda n: n < 100)], is_final=lambda n: n >= 9)
    >>> result = check_levels(counter, workers=2)
    >>> (result.verdict_text, result.states, result.store)
    ('holds', 14, 'fingerprints, 2 workers')
    """
    check_bounds(workers=workers, max_states=max_states, max_depth=max_depth)
    selected = model.safety_properties(properties, "the fingerprint search")
    report = progress if callable(progress) else (_print_progress if progress else None)
    with tempfile.TemporaryDirectory(prefix="txnspec-check-", dir=directory) as scratch:
        search = _LevelSearch(model, selected, model.symmetry if symmetry else None, workers, scratch,
                              max_states, max_depth, report, stop_on_violation)
        run_without_gc(search)
        if report is _print_progress:
            print(file=sys.stderr)
        return search.result(check_deadlock)


class _LevelSearch:
    def __init__(self, model: Model[Any], selected: Sequence[Property[Any]], canonical: Callable[[Any], Any] | None,
                 workers: int, scratch: str, max_states: int | None, max_depth: int | None,
                 report: MemoryProgress | None, stop_on_violation: bool = False) -> None:
        self.model, self.canonical, self.report = model, canonical, report
        self.stop_on_violation = stop_on_violation
        self.properties = list(selected)
        self.state_cap = max_states if max_states is not None else sys.maxsize
        self.depth_cap = max_depth if max_depth is not None else sys.maxsize
        self.levels = _Levels(scratch)
        self.seen = FingerprintSet()
        self.first_hits: dict[str, tuple[int, int]] = {}  # property -> (level, position)
        self.deadlocks: list[tuple[int, int]] = []  # (level, position) of states without successors, not final
        self.kinds: dict[str, int] = {}
        self.states = 0
        self.transitions = 0
        self.stop_reason: str | None = None
        self.depth_capped = False  # the depth bound stopped the search: its last level is whole
        self.seconds = 0.0
        self.workers = workers
        self.memory_before = _resident_bytes()
        self.peak_memory = 0
        self.worker_memory = 0
        # one process keeps its levels on disk (the fingerprint store's memory bound); workers keep theirs in
        # memory, which pays for their speed
        shards = [_Shard(model, canonical, selected, scratch, spill=workers == 1) for _ in range(workers)]
        if workers == 1:
            self.shards: list[_Remote | _Local] = [_Local(shards[0])]
        else:
            context = multiprocessing.get_context("fork")
            self.shards = [_Remote(shard, context) for shard in shards]

    def close(self) -> None:
        for shard in self.shards:
            shard.close()

    @property
    def pending(self) -> list[str]:
        return [p.name for p in self.properties if p.name not in self.first_hits]

    def _stop_if_nothing_left(self, level: int) -> int | None:
        """As explicit.py's judge: every invariant violated and every witness found ends the search (with
        ``stop_on_violation``, the first violation does). The position (in ``level``) of the state at which that
        happened, or None."""
        always = [p for p in self.properties if p.expectation is Expectation.ALWAYS]
        if self.stop_on_violation:
            violations = [self.first_hits[p.name][1] for p in always
                          if self.first_hits.get(p.name, (-1, 0))[0] == level]
            if violations:
                return min(violations)
        if not always or self.pending:
            return None
        return max(position for found, position in self.first_hits.values() if found == level)

    @property
    def _stopped(self) -> str:
        return STOPPED_ON_VIOLATION if self.stop_on_violation else \
            "every invariant is violated (the search stopped early)"

    def run(self) -> None:
        started = time.perf_counter()
        try:
            self._initial_level()
            depth = 0
            next_look = started + 1.0
            while self.levels.sizes[-1] and self.stop_reason is None:
                if depth >= self.depth_cap:
                    self.stop_reason = f"the depth cap ({self.depth_cap}) was reached"
                    self.depth_capped = True
                    break
                if len(self.shards) == 1:
                    self._next_level_alone(depth)
                else:
                    self._next_level(depth)
                depth += 1
                if self.report is not None and (time.perf_counter() >= next_look or not self.levels.sizes[-1]):
                    next_look = time.perf_counter() + 1.0
                    self.report(self.states, depth, self.states / max(time.perf_counter() - started, 1e-9),
                                _resident_bytes())
        finally:
            self.seconds = time.perf_counter() - started

    def _initial_level(self) -> None:
        fingerprints, kept = array("q"), list[Any]()
        for state in self.model.init_states():
            fingerprint = hash(self.canonical(state) if self.canonical is not None else state)
            if not self.seen.add(fingerprint):
                continue
            if len(kept) >= self.state_cap:
                self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
                break
            for prop in self.properties:
                if prop.name not in self.first_hits and _hit(prop, state):
                    self.first_hits[prop.name] = (0, len(kept))
            fingerprints.append(fingerprint)
            kept.append(state)
        self.levels.write(fingerprints, array("i", [-1] * len(kept)))
        self.states = len(kept)
        share = -(-len(kept) // len(self.shards)) if kept else 0
        _call_all(self.shards, "load", [(kept[i * share:(i + 1) * share],) for i in range(len(self.shards))])
        if self._stop_if_nothing_left(0) is not None:
            self.stop_reason = self._stopped

    def _next_level(self, depth: int) -> None:
        last = depth + 1 >= self.depth_cap  # the new level is not expanded: its states are judged, not kept
        sizes = _call_all(self.shards, "size", [()] * len(self.shards))
        expansions: list[_Expansion] = _call_all(self.shards, "expand",
                                                 [(self.pending if last else None,)] * len(self.shards))
        offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        new_fingerprints, new_parents = array("q"), array("i")
        marks: list[bytes] = []
        add = self.seen.add
        cap_left = self.state_cap - self.states
        capped_at: int | None = None  # parent position (in the level) whose successors reached the cap
        for expansion, offset in zip(expansions, offsets, strict=True):
            mark = bytearray(len(expansion.fingerprints))
            for i, (fingerprint, parent) in enumerate(zip(expansion.fingerprints, expansion.parents, strict=True)):
                if capped_at is not None or not add(fingerprint):  # once capped, what is added no longer matters
                    continue
                if len(new_fingerprints) >= cap_left:
                    capped_at = offset + parent
                    continue
                mark[i] = 1
                new_fingerprints.append(fingerprint)
                new_parents.append(offset + parent)
            marks.append(bytes(mark))
        pending = self.pending
        judgements: list[_Judgement] = _judged_in_expansion(expansions, marks) if last else \
            _call_all(self.shards, "accept", [(m, pending) for m in marks])
        kept_offsets = [sum(j.kept for j in judgements[:i]) for i in range(len(judgements))]
        level = depth + 1
        for judgement, offset in zip(judgements, kept_offsets, strict=True):
            for name, position in judgement.first_hits.items():
                hit = (level, offset + position)
                if name not in self.first_hits or hit < self.first_hits[name]:
                    self.first_hits[name] = hit
        counts = array("i")
        for expansion, offset in zip(expansions, offsets, strict=True):
            counts.extend(expansion.successor_counts)
            self.deadlocks.extend((depth, offset + t) for t in expansion.terminal)
            for kind, n in expansion.kinds.items():
                self.kinds[kind] = self.kinds.get(kind, 0) + n
        stop_at = self._stop_if_nothing_left(level)
        if stop_at is not None:
            self.stop_reason = self._stopped
            # what the one-process search would not have reached: hits in this level after the stop
            self.first_hits = {name: hit for name, hit in self.first_hits.items()
                               if hit[0] < level or hit[1] <= stop_at}
            stop_parent = new_parents[stop_at]
            del new_fingerprints[stop_at + 1:]
            del new_parents[stop_at + 1:]
            self.transitions += sum(counts[:stop_parent + 1])
        elif capped_at is not None:
            self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
            self.transitions += sum(counts[:capped_at + 1])
        else:
            self.transitions += sum(counts)
        self.levels.write(new_fingerprints, new_parents)
        self.states += len(new_fingerprints)
        self.peak_memory = max(self.peak_memory, _resident_bytes())
        if len(self.shards) > 1:  # the workers' peaks beyond what they inherited at the fork
            peaks = _call_all(self.shards, "memory", [()] * len(self.shards))
            self.worker_memory = sum(peaks)
        if self.stop_reason is None and len(self.shards) > 1 and not last:
            self._rebalance([j.kept for j in judgements])

    def _next_level_alone(self, depth: int) -> None:
        """One process: the level expanded with the visited set at hand (no candidates to ship), in the order
        and with the stops of explicit.py's loop."""
        shard = self.shards[0].shard  # type: ignore[union-attr]
        next_steps, canonical, is_final = self.model.next_steps, self.canonical, self.model.is_final
        add, kinds = self.seen.add, self.kinds
        fingerprints, parents = array("q"), array("i")
        kept = shard._queue()
        keep = depth + 1 < self.depth_cap  # the last level a depth bound lets the search reach is judged, not kept
        always = [p for p in self.properties
                  if p.name not in self.first_hits and p.expectation is Expectation.ALWAYS]
        sometimes = [p for p in self.properties
                     if p.name not in self.first_hits and p.expectation is Expectation.SOMETIMES]
        always_conds = tuple(p.condition for p in always)
        sometimes_conds = tuple(p.condition for p in sometimes)
        room = self.state_cap - self.states
        labels: dict[Any, int] = {}
        count_of = labels.get
        transitions = 0
        try:
            for position, state in enumerate(shard.level):
                successors = list(next_steps(state))
                transitions += len(successors)
                if not successors and (is_final is None or not is_final(state)):
                    self.deadlocks.append((depth, position))
                for action, successor in successors:
                    labels[action] = count_of(action, 0) + 1
                    fingerprint = hash(canonical(successor) if canonical is not None else successor)
                    if not add(fingerprint):  # seen before
                        continue
                    if len(fingerprints) >= room:  # (the search stops: the set's last addition no longer matters)
                        self.stop_reason = f"the state cap ({self.state_cap:,}) was reached"
                        return
                    fingerprints.append(fingerprint)
                    parents.append(position)
                    if keep:
                        kept.append(successor)
                    hit = False
                    for cond in always_conds:
                        if not cond(successor):
                            hit = True
                            break
                    if not hit:
                        for cond in sometimes_conds:
                            if cond(successor):
                                hit = True
                                break
                    if hit:
                        here = (depth + 1, len(fingerprints) - 1)
                        for prop in (*always, *sometimes):
                            if prop.name not in self.first_hits and _hit(prop, successor):
                                self.first_hits[prop.name] = here
                        always = [p for p in always if p.name not in self.first_hits]
                        sometimes = [p for p in sometimes if p.name not in self.first_hits]
                        always_conds = tuple(p.condition for p in always)
                        sometimes_conds = tuple(p.condition for p in sometimes)
                        if self._stop_if_nothing_left(depth + 1) is not None:
                            self.stop_reason = self._stopped
                            return
        finally:
            for action, n in labels.items():
                kind = action_kind(action)
                kinds[kind] = kinds.get(kind, 0) + n
            self.transitions += transitions
            self.levels.write(fingerprints, parents)
            self.states += len(fingerprints)
            self.peak_memory = max(self.peak_memory, _resident_bytes())
            shard.level.close()
            shard.level = kept

    def _rebalance(self, sizes: list[int]) -> None:
        """Move states between neighbours so that each shard holds about as many as the others, in order."""
        total = len(self.shards)
        if max(sizes) - min(sizes) <= max(64, sum(sizes) // (4 * total)):
            return
        targets = [sum(sizes) * (i + 1) // total - sum(sizes) * i // total for i in range(total)]
        starts = [sum(sizes[:i]) for i in range(total)]
        wanted = [sum(targets[:i]) for i in range(total)]
        # shard i holds [starts[i], starts[i] + sizes[i]) of the level and should hold [wanted[i], + targets[i])
        gives = [(max(0, min(wanted[i], starts[i] + sizes[i]) - starts[i]),
                  max(0, starts[i] + sizes[i] - max(wanted[i] + targets[i], starts[i]))) for i in range(total)]
        handed = _call_all(self.shards, "give", gives)
        heads: list[list[Any]] = [[] for _ in range(total)]
        tails: list[list[Any]] = [[] for _ in range(total)]
        # what each shard keeps: the middle of its part, inside the range it should hold
        kept = [(starts[i] + gives[i][0], starts[i] + sizes[i] - gives[i][1]) for i in range(total)]
        for i, (head, tail) in enumerate(handed):
            for position, state in [*enumerate(head, starts[i]), *enumerate(tail, kept[i][1])]:
                owner = next(o for o in range(total) if wanted[o] <= position < wanted[o] + targets[o])
                first_kept, end_kept = kept[owner]
                before = first_kept >= end_kept or position < first_kept
                (heads if before else tails)[owner].append((position, state))
        _call_all(self.shards, "take", [([s for _, s in sorted(h, key=lambda x: x[0])],
                                         [s for _, s in sorted(t, key=lambda x: x[0])])
                                        for h, t in zip(heads, tails, strict=True)])

    def _path(self, level: int, position: int) -> tuple[tuple[Any, Any], ...]:
        """Re-execute the path to ``(level, position)``: at each step the first successor with the next
        fingerprint (the step the one-process search recorded)."""
        wanted = self.levels.path_fingerprints(level, position)
        canonical = self.canonical

        def fingerprint(state: Any) -> int:
            return hash(canonical(state) if canonical is not None else state)

        state = next(s for s in self.model.init_states() if fingerprint(s) == wanted[0])
        steps: list[tuple[Any, Any]] = [(None, state)]
        for target in wanted[1:]:
            action, state = next((a, s) for a, s in self.model.next_steps(state) if fingerprint(s) == target)
            steps.append((action, state))
        return tuple(steps)

    def result(self, check_deadlock: bool) -> CheckResult:
        complete = self.stop_reason is None
        # in explicit.py's order: the invariants, then the sometimes properties
        verdicts = safety_verdicts(sorted(self.properties, key=lambda p: p.expectation is not Expectation.ALWAYS),
                                   self.first_hits.get, lambda hit: self._path(*hit), complete)
        deadlocks = sorted(self.deadlocks) if check_deadlock else []
        coverage, never_taken = kinds_coverage(self.model, self.kinds)
        depth = len(self.levels.sizes) - 1 - (not self.levels.sizes[-1])
        return CheckResult(
            model_name=self.model.name, states=self.states, transitions=self.transitions, depth=max(depth, 0),
            seconds=self.seconds, complete=complete, verdicts=verdicts,
            deadlock=Counterexample("deadlock", self._path(*deadlocks[0])) if deadlocks else None,
            deadlock_count=len(deadlocks), coverage=coverage, never_taken=never_taken,
            describe_state=self.model.describe_state,
            stop_reason=self.stop_reason, symmetry=self.canonical is not None,
            store="fingerprints" + (f", {self.workers} workers" if self.workers > 1 else ""),
            collision_probability=collision_probability(self.states),
            memory_bytes=max(0, self.peak_memory - self.memory_before) + self.worker_memory,
            level_sizes=finished_levels(self.levels.sizes, self.stop_reason is None or self.depth_capped))


def _print_progress(states: int, depth: int, rate: float, memory: int) -> None:
    print(f"\r  {states:,} states, depth {depth}, {rate:,.0f} states/s, {memory / 2**20:,.0f} MB", end="",
          file=sys.stderr, flush=True)
