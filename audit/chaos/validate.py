"""Trace validation: is the log a chaos run observed a log the spec's partition leader could have written?

What it checks
    The final read_uncommitted read gives, per partition, every data record at its offset; the offsets it
    skips are control batches (transaction markers), which no client sees. The final read_committed read
    gives the offsets a read_committed consumer is shown. The history says who sent each value (its
    producer and transaction) and how each transaction ended for its client (:func:`.anomalies.fates`).

    A history is *explained* when there is an assignment of the unobserved parts (which producer's marker,
    COMMIT or ABORT, sits at each skipped offset, and the producers' epochs) such that replaying the
    observed log through the spec's own partition model (:mod:`txnspec.spec.partition`: ``append_data``
    with the epoch and duplicate rules, ``append_end_txn_marker`` with the marker's epoch rules) accepts
    every record at exactly its observed offset, the spec's read_committed ``fetch`` from offset 0 returns
    exactly the offsets the real consumer read, and each transaction has one decision on every partition,
    agreeing with its client's outcome (committed: COMMIT; aborted or never committed: ABORT; unknown:
    either). Otherwise it is *unexplained at* the first record or marker no assignment gets past, with the
    deepest partial assignment found (the closest behaviour). The search (:func:`validate`) is a depth-first
    search over the skipped offsets, partition after partition with the decisions shared, pruned at each
    marker by the read_committed read (a COMMIT marker must make exactly its transaction's records visible,
    an ABORT none).

    Epochs are not observed: the ``k``-th instance of a transactional id to finish its init owns the epochs ``[SPAN*k,
    SPAN*(k+1) - 1]`` (an init bumps past every epoch of the instance before); its data takes the producer's
    current epoch when it is its own, a TV2 marker bumps it (KIP-890), a TV1 marker keeps it. A producer's
    transaction version is the cluster's for the Java client and 1 for librdkafka (:func:`client_versions`). A
    record of an older instance after a newer instance's epoch reached the partition is rejected by the spec's
    ``checkProducerEpoch``.

How it scales
    Linear in the log when every skipped offset has one consistent marker (the common case: the
    read_committed read decides it); it branches only where several open transactions of unknown outcome,
    or markers closing nothing (a partition added but its record never written), fit one skipped offset.
    :data:`NODE_BUDGET` bounds the search; a search that exhausts it is inconclusive, not a verdict.

Leaves out
    The coordinator (its log is not read), ``__consumer_offsets`` (the group's offsets are judged by
    :mod:`.anomalies`), sequence numbers (``validate_sequence=False``: one record per batch, librdkafka's
    batching is not observed; duplicates are still judged by the spec's ``findDuplicateBatch`` on a value's
    send index), timing (a marker's place is not tied to the clock), the high watermark during the run.
"""

from __future__ import annotations

import bisect
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from txnspec.audit.chaos.anomalies import Final, Txn, fates, final_reads
from txnspec.audit.chaos.history import Event, Op, pair
from txnspec.spec.errors import Errors
from txnspec.spec.messages import IsolationLevel, TransactionResult
from txnspec.spec.partition import PartitionState, append_data, append_end_txn_marker, fetch

NODE_BUDGET = 200_000
SEGMENT = 64  # records and markers after which a settled log prefix is checked and dropped
SPAN = 1_000_000  # epochs per producer instance (a TV2 producer bumps its epoch once a transaction)
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


class Place(NamedTuple):
    """Where the search stopped: an offset of a partition (``tp@offset``), or its end (``offset`` None)."""

    tp: str
    offset: int | None

    def __str__(self) -> str:
        return f"{self.tp} end" if self.offset is None else f"{self.tp}@{self.offset}"


@dataclass(frozen=True)
class Writer:
    """Who wrote a value, as the spec's partition sees it."""

    producer_id: int
    instance: int
    transactional: bool
    sequence: int
    txn: str | None


@dataclass
class Verdict:
    explained: bool
    complete: bool  # False: the node budget ran out
    partitions: int
    records: int
    markers: int
    nodes: int
    seconds: float
    where: str = ""  # unexplained: the partition and offset no assignment got past
    why: str = ""
    closest: list[str] = field(default_factory=list)  # the deepest partial assignment's markers
    decisions: dict[str, str] = field(default_factory=dict)
    event: int | None = None  # unexplained: the history event there (the invoke of the record's send)

    def to_json(self) -> dict[str, Any]:
        return {"explained": self.explained, "complete": self.complete, "partitions": self.partitions,
                "event": self.event,
                "records": self.records, "markers": self.markers, "nodes": self.nodes,
                "seconds": round(self.seconds, 3), "where": self.where, "why": self.why,
                "closest": self.closest[-12:], "decisions": len(self.decisions)}


class _Budget(Exception):
    pass


class _Search:
    def __init__(self, final: Final, txns: dict[str, Txn], writers: dict[str, Writer], tv: int,
                 budget: int, tv_of: dict[int, int] | None = None) -> None:
        self.final, self.txns, self.writers, self.tv, self.budget = final, txns, writers, tv, budget
        self.tv_of = tv_of or {}  # a producer's own transaction version (librdkafka speaks the pre-KIP-890 EndTxn)
        self.nodes = 0
        self.deepest: tuple[int, Place | None, str, list[str]] = (-1, None, "", [])
        self.partitions = sorted(final.uncommitted)
        self.senders: dict[str, set[int]] = {}  # partition -> producer ids that invoked a send to it
        self.by_pid: dict[str, dict[int, list[tuple[int, str | None]]]] = {}
        for t in txns.values():
            for s in t.sends:
                value = str(s.invoke.value.get("value"))
                w = writers.get(value)
                if w is not None:
                    tp = f"{s.invoke.value['topic']}/{s.invoke.value['partition']}"
                    self.senders.setdefault(tp, set()).add(w.producer_id)

    def fail(self, depth: int, where: Place, why: str, path: list[str]) -> None:
        if depth > self.deepest[0]:
            self.deepest = (depth, where, why, list(path))

    def tick(self) -> None:
        self.nodes += 1
        if self.nodes > self.budget:
            raise _Budget()

    # data epoch: the producer's current one when it lies in this instance's range, else the instance's first
    def data_epoch(self, state: PartitionState, w: Writer) -> int:
        entry = state.entry(w.producer_id)
        low, high = w.instance * SPAN, w.instance * SPAN + SPAN - 1
        current = entry.producer_epoch if entry is not None else -1
        return current if low <= current <= high else (high if current > high else low)

    def run(self) -> Iterator[dict[str, str]]:
        yield from self.partition(0, {}, 0, [])

    def partition(self, index: int, decisions: dict[str, str], depth: int, path: list[str]) -> Iterator[dict[str, str]]:
        if index == len(self.partitions):
            yield decisions
            return
        tp = self.partitions[index]
        log = self.final.uncommitted.get(tp, {})
        end = int(self.final.ops["read_uncommitted"].done.value.get("ends", {}).get(tp, max(log, default=-1) + 1))
        for decided in self.offset(tp, 0, end, PartitionState(), decisions, depth, path):
            yield from self.partition(index + 1, decided, depth + end, path)

    def offset(self, tp: str, offset: int, end: int, state: PartitionState, decisions: dict[str, str],
               depth: int, path: list[str]) -> Iterator[dict[str, str]]:
        self.tick()
        log = self.final.uncommitted.get(tp, {})
        if offset == end or (not state.ongoing and len(state.log) >= SEGMENT):
            # the read_committed view of the log so far; with no transaction open, no aborted range crosses
            # this offset, so the part before it is settled and the state restarts here (linear, not quadratic)
            start = state.log_start_offset
            shown = set(fetch(state, start, IsolationLevel.READ_COMMITTED).records)
            seen = {o for o in self.final.committed.get(tp, {}) if start <= o and (o < offset or offset == end)}
            if shown != seen:
                extra, missing = sorted(seen - shown), sorted(shown - seen)
                held = [f"{self.writers[log[first]].txn} from offset {first}" for first, _ in state.ongoing
                        if first in log]
                self.fail(depth + offset, Place(tp, None if offset == end else offset),
                          f"the spec's read_committed fetch of offsets {start}..{offset - 1} returns "
                          f"{len(shown)} records; the consumer read {len(seen)} (read but not allowed: {extra[:3]}, "
                          f"allowed but not read: {missing[:3]}"
                          + (f"; left open: {', '.join(held)}" if held else "") + ")", path)
                return
            if offset == end:
                yield decisions
                return
            state = PartitionState(log_start_offset=offset, log_end_offset=offset, producers=state.producers)
        while offset < end and offset in log:  # data records: no choice, so a loop (the search recurses on markers)
            value = log[offset]
            w = self.writers.get(value)
            if w is None:
                self.fail(depth + offset, Place(tp, offset), f"{value!r} was sent by no client of the history", path)
                return
            epoch = self.data_epoch(state, w) if w.transactional else 0
            after, answer = append_data(state, w.producer_id, epoch, w.sequence, 1, w.transactional,
                                        validate_sequence=False)
            if answer.error is not Errors.NONE or answer.base_offset != offset or after.log_end_offset != offset + 1:
                why = answer.error.name if answer.error is not Errors.NONE else (
                    f"the spec answers it as a duplicate at offset {answer.base_offset}" if answer.duplicate
                    else f"the spec appends it at {answer.base_offset}")
                self.fail(depth + offset, Place(tp, offset), f"{value!r} of {w.txn or 'an idempotent producer'}: {why}",
                          path)
                return
            state, offset = after, offset + 1
        if offset == end:
            yield from self.offset(tp, offset, end, state, decisions, depth, path)
            return
        yield from self.marker(tp, offset, end, state, decisions, depth, path)

    def marker(self, tp: str, offset: int, end: int, state: PartitionState, decisions: dict[str, str],
               depth: int, path: list[str]) -> Iterator[dict[str, str]]:
        """The skipped ``offset`` is a control batch: every marker that fits."""
        log = self.final.uncommitted.get(tp, {})
        visible = self.final.committed.get(tp, {})
        deadlines: list[tuple[int, int]] = []
        for pid, e in state.producers:
            if e.current_txn_first_offset == -1:
                continue
            later = self.next_record(tp, pid, offset)
            current = self.writers[log[e.current_txn_first_offset]].txn if e.current_txn_first_offset in log else None
            if later is not None and later[1] == current:
                continue  # its transaction writes here again later: this marker cannot close it
            deadlines.append((later[0] if later is not None else end, pid))
        # earliest deadline first: the transaction whose producer writes here next must be closed first
        open_pids = [pid for _, pid in sorted(deadlines)]
        tried = False
        for pid in open_pids:
            entry = state.entry(pid)
            assert entry is not None
            first = entry.current_txn_first_offset
            mine = [o for o in range(first, offset) if o in log and self.writers[log[o]].producer_id == pid]
            names = {self.writers[log[o]].txn for o in mine} - {None}
            for result in (COMMIT, ABORT):
                if any(not self.allowed(n, result, decisions) for n in names):
                    continue
                shown = [o for o in mine if o in visible]
                if (result is COMMIT and len(shown) != len(mine)) or (result is ABORT and shown):
                    continue  # the read_committed read says otherwise
                tried = True
                yield from self.apply(tp, offset, end, state, decisions, depth, path, pid, result,
                                      {n: result.value for n in names if n})
        for pid in sorted(self.senders.get(tp, set()) - set(open_pids)):
            for result in (ABORT, COMMIT):  # a marker that closes nothing: a partition added, its record unwritten
                tried = True
                yield from self.apply(tp, offset, end, state, decisions, depth, path, pid, result, {})
        if not tried:
            self.fail(depth + offset, Place(tp, offset), "a control batch no producer's marker fits: no open "
                      "transaction whose outcome and read_committed visibility allow it", path)

    def next_record(self, tp: str, pid: int, offset: int) -> tuple[int, str | None] | None:
        """The first record of producer ``pid`` after ``offset`` on ``tp``: its offset and transaction."""
        index = self.by_pid.get(tp)
        if index is None:
            index = {}
            for o, value in sorted(self.final.uncommitted.get(tp, {}).items()):
                w = self.writers.get(value)
                if w is not None:
                    index.setdefault(w.producer_id, []).append((o, w.txn))
            self.by_pid[tp] = index
        records = index.get(pid, [])
        at = bisect.bisect_right(records, (offset, chr(0x10FFFF)))
        return records[at] if at < len(records) else None

    def allowed(self, name: str | None, result: TransactionResult, decisions: dict[str, str]) -> bool:
        if name is None:
            return False
        if name in decisions:
            return decisions[name] == result.value
        fate = self.txns[name].fate if name in self.txns else "unknown"
        return fate == "unknown" or (fate == "committed") == (result is COMMIT)

    def apply(self, tp: str, offset: int, end: int, state: PartitionState, decisions: dict[str, str], depth: int,
              path: list[str], pid: int, result: TransactionResult, decided: dict[str, str]
              ) -> Iterator[dict[str, str]]:
        entry = state.entry(pid)
        current = entry.producer_epoch if entry is not None else 0
        tv = self.tv_of.get(pid, self.tv)
        epoch = current + 1 if tv >= 2 else max(current, 0)
        after, answer = append_end_txn_marker(state, pid, epoch, 0, result, tv)
        if answer.error is not Errors.NONE:
            self.fail(depth + offset, Place(tp, offset), f"a {result.value} marker of producer {pid}: "
                      f"{answer.error.name}", path)
            return
        path.append(f"{tp}@{offset}: {result.value} marker of producer {pid}"
                    + (f" ({', '.join(sorted(decided))})" if decided else ""))
        try:
            yield from self.offset(tp, offset + 1, end, after, {**decisions, **decided}, depth, path)
        finally:
            path.pop()


def writers_of(ops: list[Op], txns: dict[str, Txn]) -> dict[str, Writer]:
    """Each sent value's writer: one producer id per transactional id (one per idempotent process), the
    instance, and its send index as the sequence."""
    pids: dict[str, int] = {}
    counts: dict[int, int] = {}
    out: dict[str, Writer] = {}
    # an instance's epochs follow the order its init finished in, not its number (a JVM slow to start may call
    # init after the instance started after it); overlapping inits are taken in that order, as coordination.py does
    rank: dict[tuple[str, int], int] = {}
    for op in sorted((o for o in ops if o.f == "init" and o.outcome == "ok"), key=lambda o: o.done.time):
        key_ = (str(op.invoke.value.get("tid")), int(op.invoke.value.get("instance", -1)))
        rank.setdefault(key_, sum(1 for k in rank if k[0] == key_[0]))
    for op in ops:
        if op.f != "send":
            continue
        value = str(op.invoke.value.get("value"))
        name = op.invoke.value.get("txn")
        t = txns.get(name) if name else None
        key = t.tid if t is not None else op.process
        pid = pids.setdefault(key, len(pids) + 1)
        counts[pid] = counts.get(pid, -1) + 1
        instance = rank.get((t.tid, t.instance), t.instance) if t is not None else 0
        out[value] = Writer(pid, instance, t is not None, counts[pid], t.name if t else None)
    return out


def _event_at(where: Place | None, final: Final, ops: list[Op]) -> int | None:
    """The history event at ``where``: the invoke of the send of the value read there."""
    value = None if where is None or where.offset is None else final.uncommitted.get(where.tp, {}).get(where.offset)
    for op in ops:
        if op.f == "send" and value is not None and op.invoke.value.get("value") == value:
            return int(op.invoke.index)
    return None


def client_versions(ops: list[Op], txns: dict[str, Txn], writers: dict[str, Writer], cluster: int) -> dict[int, int]:
    """Each producer id's transaction version: the cluster's for Kafka's Java client, at most 1 for librdkafka
    (2.16 sends EndTxn below v5, so its coordinator follows the TV1 rules, KIP-890's ``clientTransactionVersion``)."""
    clients = {str(op.invoke.value.get("tid")): str(op.invoke.value.get("client", "")) for op in ops
               if op.f == "init" and op.invoke.value.get("client")}
    out: dict[int, int] = {}
    for w in writers.values():
        t = txns.get(w.txn) if w.txn else None
        if t is not None:
            out[w.producer_id] = cluster if clients.get(t.tid) != "librdkafka" else min(cluster, 1)
    return out


def validate(events: list[Event], transaction_version: int, budget: int = NODE_BUDGET) -> Verdict:
    """Explain the history's logs with the spec's partition model (module docstring)."""
    started = time.perf_counter()
    ops = pair(events)
    txns = fates(ops)
    final = final_reads(ops)
    records = sum(len(r) for r in final.uncommitted.values())
    if "read_uncommitted" not in final.ops or "read_committed" not in final.ops:
        return Verdict(False, False, 0, records, 0, 0, time.perf_counter() - started, "the final reads",
                       "inconclusive: the history has no final read_committed and read_uncommitted reads")
    ends = final.ops["read_uncommitted"].done.value.get("ends", {})
    markers = sum(int(ends.get(tp, 0)) - len(r) for tp, r in final.uncommitted.items())
    writers = writers_of(ops, txns)
    search = _Search(final, txns, writers, transaction_version, budget, client_versions(ops, txns, writers,
                                                                                        transaction_version))
    outcome: dict[str, Any] = {"complete": True, "found": None}

    def explore() -> None:
        try:
            outcome["found"] = next(search.run(), None)
        except _Budget:
            outcome["complete"] = False
        except Exception as exc:  # never a silent "unexplained": the search itself failed
            outcome["complete"] = False
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    # the search recurses once per marker: a thread with a large stack and recursion limit holds long logs
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 200_000))
    size = threading.stack_size(512 * 1024 * 1024)
    try:
        worker = threading.Thread(target=explore, name="chaos-validate")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(size)
        sys.setrecursionlimit(limit)
    complete, found = bool(outcome["complete"]), outcome["found"]
    seconds = time.perf_counter() - started
    if found is not None:
        return Verdict(True, True, len(search.partitions), records, markers, search.nodes, seconds, decisions=found)
    _, where, why, closest = search.deepest
    if "error" in outcome:
        why = f"the search failed ({outcome['error']})"
    return Verdict(False, complete, len(search.partitions), records, markers, search.nodes, seconds,
                   "" if where is None else str(where),
                   why if complete else f"inconclusive: the search's budget of {budget:,} nodes ran out ({why})",
                   closest, event=_event_at(where, final, ops))
