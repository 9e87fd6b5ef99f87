"""Trace validation of the transaction coordinator: is what the clients were told about each transactional id a
behaviour of the spec's transaction coordinator (:mod:`txnspec.spec.coordinator`)? (:mod:`.groups` does the same
for the group coordinator.)

What it checks
    *Per transactional id* (:func:`validate_coordinator`): the calls of every instance of the id (init, the first
    send to each partition, the offsets, commit, abort), in the order they completed (a call never answered at its
    invoke), are replayed as requests through the spec's handlers: ``InitProducerId`` (retried while it answers
    ``CONCURRENT_TRANSACTIONS``, as the clients do; the markers of a prepared transaction are written before),
    ``AddPartitionsToTxn`` (a send's partition, with the client's transaction version), ``AddOffsetsToTxn``,
    ``EndTxn`` (its markers written at once). A call that returned ok must be answered ``NONE``; a call that failed
    with a coordinator's error (:data:`CLIENT_ERRORS`: fenced, invalid state) must be answered with it, or be one
    the client raised without asking because the spec's coordinator had already moved past the instance's epoch
    (``INVALID_TXN_STATE`` also without that: the Java client raises it from a partition's answer under KIP-890's
    verification); any other failure, or no answer, may or may not have reached the coordinator (both are tried).
    Steps the clients do not see are tried where they may have happened: the coordinator aborting an open
    transaction on its timeout, and a KIP-360 epoch bump after an abort. Each transaction's decision (COMMIT when an
    ``EndTxn(COMMIT)`` was accepted; ABORT from an ``EndTxn(ABORT)``, a fence by a newer instance's init or the
    timeout) must be the one the partition validation found (:mod:`.validate`). An id is *unexplained at* the first
    call no choice gets past, with the deepest choices found.

How it scales
    Linear per id in the common case (every call ok: no choice); it branches on calls without an answer and on
    failures, bounded by :data:`NODE_BUDGET` per id (past it: inconclusive, not a verdict); a (call, state) that
    led nowhere is not searched again, and decisions are checked as they are made.

Leaves out
    The order of overlapping calls of two instances of one id (taken by completion), coordinator failover
    (the spec's state is the one its log reloads: unchanged for these steps), idempotent producers (no
    transactional id), the per-partition marker acknowledgements (written at once).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from txnspec.audit.chaos.anomalies import Txn
from txnspec.audit.chaos.history import Op
from txnspec.spec.coordinator import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
    handle_init_producer_id,
)
from txnspec.spec.coordinator_state import CoordinatorConfig, CoordinatorState
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    InitProducerId,
    InitProducerIdResponse,
    TransactionResult,
)
from txnspec.spec.txn_expiry import abort_timed_out_transaction
from txnspec.spec.txn_markers import markers_written
from txnspec.spec.txn_state import TxnState

NODE_BUDGET = 50_000
TIMEOUT_MS = 6000  # the workload's transaction.timeout.ms
FENCED = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH})
# a client's error name -> the coordinator answers it stands for (librdkafka's and the Java client's names)
CLIENT_ERRORS: dict[str, frozenset[Errors]] = {
    "_FENCED": FENCED, "PRODUCER_FENCED": FENCED, "INVALID_PRODUCER_EPOCH": FENCED,
    "ProducerFencedException": FENCED, "InvalidProducerEpochException": FENCED,
    "INVALID_TXN_STATE": frozenset({Errors.INVALID_TXN_STATE}),
    "InvalidTxnStateException": frozenset({Errors.INVALID_TXN_STATE}),
}
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


@dataclass
class Verdict:
    explained: bool
    complete: bool
    ids: int
    calls: int
    nodes: int
    where: str = ""  # unexplained: the transactional id or group, and the call
    why: str = ""
    event: int | None = None
    closest: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"explained": self.explained, "complete": self.complete, "ids": self.ids, "calls": self.calls,
                "nodes": self.nodes, "where": self.where, "why": self.why, "event": self.event,
                "closest": self.closest[-8:]}


@dataclass(frozen=True)
class _At:
    """The replay of one id after some calls: the spec's coordinator, each instance's producer id and epoch, the
    transactions the coordinator holds open, and the decisions so far."""

    cs: CoordinatorState
    views: tuple[tuple[int, tuple[int, int]], ...] = ()
    open: tuple[str, ...] = ()
    decided: tuple[tuple[str, str], ...] = ()

    def view(self, instance: int) -> tuple[int, int] | None:
        return dict(self.views).get(instance)

    def with_view(self, instance: int, pid: int, epoch: int) -> _At:
        views = dict(self.views)
        views[instance] = (pid, epoch)
        return _At(self.cs, tuple(sorted(views.items())), self.open, self.decided)

    def decide(self, result: TransactionResult) -> _At:
        return _At(self.cs, self.views, (), self.decided + tuple((n, result.value) for n in self.open))


class _Budget(Exception):
    pass


class _Replay:
    def __init__(self, tid: str, calls: list[tuple[Op, Txn | None]], tv_of: dict[int, int], cluster_tv: int,
                 expected: dict[str, str], budget: int) -> None:
        self.tid, self.calls, self.tv_of, self.expected, self.budget = tid, calls, tv_of, expected, budget
        self.config = CoordinatorConfig(transaction_version=cluster_tv)
        self.nodes = 0
        self.deepest: tuple[int, str, list[str]] = (-1, "", [])
        self.dead: set[tuple[int, _At]] = set()
        self.last: dict[str, int] = {}  # each transaction's last call
        for i, (_, txn) in enumerate(calls):
            if txn is not None:
                self.last[txn.name] = i
        self.closing: dict[int, list[str]] = {}
        for name, i in self.last.items():
            self.closing.setdefault(i, []).append(name)

    def fail(self, index: int, why: str, path: list[str]) -> None:
        if index >= self.deepest[0]:
            self.deepest = (index, why, list(path))

    def tv(self, instance: int) -> int:
        return self.tv_of.get(instance, 1)

    # --- the spec's steps -------------------------------------------------------------------------------
    def settle(self, at: _At) -> _At:
        """The markers of a prepared transaction written (the coordinator completes it)."""
        md = at.cs.metadata(self.tid)
        if md is not None and md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return _At(markers_written(at.cs, self.tid, config=self.config).state, at.views, at.open, at.decided)
        return at

    def time_out(self, at: _At) -> _At | None:
        """The coordinator aborts the open transaction on its timeout (None: nothing open)."""
        md = at.cs.metadata(self.tid)
        if md is None or md.state is not TxnState.ONGOING:
            return None
        cs = abort_timed_out_transaction(at.cs, self.tid, config=self.config).state
        return self.settle(_At(cs, at.views, at.open, at.decided).decide(ABORT))

    def init(self, at: _At, instance: int, expected: tuple[int, int] | None = None) -> tuple[_At, Errors]:
        for _ in range(4):  # the client retries CONCURRENT_TRANSACTIONS; a fence aborts the open transaction
            md = at.cs.metadata(self.tid)
            ongoing = md is not None and md.state is TxnState.ONGOING
            pid, epoch = expected if expected is not None else (-1, -1)
            r = handle_init_producer_id(at.cs, InitProducerId(self.tid, TIMEOUT_MS, pid, epoch), config=self.config)
            at = _At(r.state, at.views, at.open, at.decided)
            if ongoing and r.response is not None and r.response.error is Errors.CONCURRENT_TRANSACTIONS:
                at = at.decide(ABORT)
            at = self.settle(at)
            if r.response is None or r.response.error is not Errors.CONCURRENT_TRANSACTIONS:
                break
        response = r.response
        assert isinstance(response, InitProducerIdResponse)
        if response.error is Errors.NONE:
            at = at.with_view(instance, response.producer_id, response.producer_epoch)
        return at, response.error

    def request(self, at: _At, op: Op, txn: Txn | None, instance: int) -> tuple[_At, Errors]:
        """The request ``op`` stands for, from ``instance``'s view: the new state and the spec's answer."""
        view = at.view(instance)
        if op.f == "init":
            return self.init(at, instance)
        if view is None:
            return at, Errors.INVALID_PRODUCER_ID_MAPPING  # no producer id: the client cannot have asked
        pid, epoch = view
        tv = self.tv(instance)
        if op.f in ("send", "offsets"):
            if op.f == "send":
                tp = f"{op.invoke.value['topic']}-{op.invoke.value['partition']}"
                r = handle_add_partitions_to_txn(at.cs, AddPartitionsToTxn(self.tid, pid, epoch, frozenset({tp}), tv),
                                                 config=self.config)
            else:
                r = handle_add_offsets_to_txn(at.cs, AddOffsetsToTxn(self.tid, pid, epoch,
                                                                    str(op.invoke.value.get("group"))),
                                              config=self.config)
            assert r.response is not None
            opened = at.open + ((txn.name,) if txn is not None and txn.name not in at.open else ())
            return (_At(r.state, at.views, opened, at.decided) if r.response.error is Errors.NONE else
                    _At(r.state, at.views, at.open, at.decided)), r.response.error
        result = COMMIT if op.f == "commit" else ABORT
        r = handle_end_txn(at.cs, EndTxn(self.tid, pid, epoch, result, tv), config=self.config)
        ended = r.response
        assert isinstance(ended, EndTxnResponse)
        error = ended.error
        after = _At(r.state, at.views, at.open, at.decided)
        if error is Errors.NONE:
            after = self.settle(after.decide(result) if at.open else after)
            if tv >= 2 and ended.producer_epoch >= 0:  # KIP-890: the bumped epoch comes back
                after = after.with_view(instance, ended.producer_id, ended.producer_epoch)
        return after, error

    def fenced(self, at: _At, instance: int) -> bool:
        """The coordinator moved past this instance's producer id and epoch (the client learns it on its own)."""
        md, view = at.cs.metadata(self.tid), at.view(instance)
        return md is not None and view is not None and (md.producer_id, md.producer_epoch) != view

    # --- the search ---------------------------------------------------------------------------------------
    def choices(self, at: _At, op: Op, txn: Txn | None, instance: int) -> Iterator[tuple[_At, str]]:
        """Every state after ``op`` that agrees with its outcome, with a note of the choice."""
        outcome, error_name = op.outcome, op.done.error or ""
        starts = [(at, "")]
        if outcome != "ok" or op.f == "init":
            timed_out = self.time_out(at)
            if timed_out is not None:
                starts.append((timed_out, "the coordinator aborted the open transaction on its timeout; "))
        for start, note in starts:
            after, error = self.request(start, op, txn, instance)
            if outcome == "ok":
                if error is Errors.NONE:
                    yield after, note + "answered NONE"
                    if op.f == "abort":  # KIP-360: an abort after an abortable error may bump the epoch
                        view = after.view(instance)
                        if view is not None:
                            bumped, e = self.init(after, instance, view)
                            if e is Errors.NONE:
                                yield bumped, note + "answered NONE, then an epoch bump (KIP-360)"
                elif not start.open and op.f in ("commit", "abort"):
                    yield start, note + "not sent (no partition added: the client ends it alone)"
                continue
            # a send's or offsets' error may be a partition's or the group coordinator's answer (a produce refused
            # as fenced): only init, commit and abort name the transaction coordinator's answer
            wanted = CLIENT_ERRORS.get(error_name) if op.f in ("init", "commit", "abort") else None
            if wanted is not None:
                if error in wanted:
                    yield after, note + f"answered {error.name}"
                if (wanted & FENCED and self.fenced(start, instance)) or Errors.INVALID_TXN_STATE in wanted:
                    yield start, note + "raised by the client without a request"
                continue
            yield start, note + "never reached the coordinator"
            if error is Errors.NONE:
                yield after, note + "reached it and was answered NONE (the answer was lost)"

    def end(self, at: _At) -> _At | None:
        """After the run the coordinator aborts what is left open; every decision must be the partitions'."""
        end = self.time_out(at) or at
        wrong = [(n, r) for n, r in end.decided if self.expected.get(n, r) != r]
        if not wrong:
            return end
        name, got = wrong[0]
        self.fail(len(self.calls), f"{name}: the partitions show {self.expected[name]}; the coordinator's timeout "
                                   f"decided {got}", [])
        return None

    def accept(self, index: int, at: _At) -> _At | None:
        """``at`` after call ``index``, if its decisions are the partitions' and every transaction whose last call
        this was is decided or still open (to be aborted later); decisions no later call can change are dropped,
        so states of different pasts meet again (and the memo of dead ends works)."""
        for name, result in at.decided:
            if self.expected.get(name, result) != result:
                self.fail(index, f"{name}: the coordinator decides {result}; the partitions show "
                                 f"{self.expected[name]}", [])
                return None
        decided = {n for n, _ in at.decided}
        for name in self.closing.get(index, ()):
            if name in self.expected and name not in decided and name not in at.open:
                self.fail(index, f"{name}: the partitions show {self.expected[name]}; after its last call the "
                                 "coordinator neither decided it nor holds it open", [])
                return None
        return _At(at.cs, at.views, at.open, tuple((n, r) for n, r in at.decided if self.last.get(n, -1) > index))

    def search(self) -> _At | None:
        """Depth-first over the choices, iteratively (histories are long); a (call, state) pair that led nowhere
        is never searched again, so the search is polynomial in the states each call can reach."""
        frames: list[list[Any]] = [[0, _At(CoordinatorState()), None, False, ""]]  # index, at, choices, tried, note
        while frames:
            frame = frames[-1]
            index, at = frame[0], frame[1]
            if frame[2] is None:
                if (index, at) in self.dead:
                    frames.pop()
                    continue
                self.nodes += 1
                if self.nodes > self.budget:
                    raise _Budget()
                if index == len(self.calls):
                    end = self.end(at)
                    if end is not None:
                        return end
                    self.dead.add((index, at))
                    frames.pop()
                    continue
                op, txn = self.calls[index]
                instance = int(op.invoke.value.get("instance", txn.instance if txn is not None else -1))
                frame[2] = self.choices(at, op, txn, instance)
            step = next(frame[2], None)
            if step is None:
                if not frame[3]:
                    op = self.calls[index][0]
                    self.fail(index, f"{op.process} {op.f} {op.outcome}" + (f" ({op.done.error})" if op.done.error
                                                                             else "")
                              + ": no state of the spec's coordinator answers it so", [f[4] for f in frames[1:]])
                self.dead.add((index, at))
                frames.pop()
                continue
            frame[3] = True
            after, note = step
            kept = self.accept(index, after)
            if kept is None:
                continue
            after = kept
            op = self.calls[index][0]
            frames.append([index + 1, after, None, False, f"#{op.invoke.index} {op.process} {op.f} {op.outcome}: "
                                                          f"{note}"])
        return None


def coordinator_calls(ops: list[Op], txns: dict[str, Txn]) -> dict[str, list[tuple[Op, Txn | None]]]:
    """Each transactional id's calls the coordinator sees, in completion order (a send only the first time its
    transaction writes the partition)."""
    out: dict[str, list[tuple[Op, Txn | None]]] = {}
    seen: set[tuple[str, str]] = set()
    # a call that was answered took effect before its answer; one never answered may have taken effect at any
    # time after its invoke (a killed process's last sends): placed at its invoke, with "never" tried as well
    for op in sorted(ops, key=lambda o: (o.done.time if o.outcome != "info" else o.invoke.time, o.invoke.index)):
        txn = txns.get(str(op.invoke.value.get("txn"))) if op.invoke.value.get("txn") else None
        if op.f == "init" and op.invoke.value.get("tid"):
            out.setdefault(str(op.invoke.value["tid"]), []).append((op, None))
        elif op.f in ("send", "offsets", "commit", "abort") and txn is not None:
            if op.f == "send":
                key = (txn.name, f"{op.invoke.value['topic']}/{op.invoke.value['partition']}")
                if key in seen and op.outcome == "ok":
                    continue
                if op.outcome == "ok":
                    seen.add(key)
            out.setdefault(txn.tid, []).append((op, txn))
    return out


def validate_coordinator(ops: list[Op], txns: dict[str, Txn], decisions: dict[str, str], cluster_tv: int,
                         tv_of_tid: dict[str, int], budget: int = NODE_BUDGET) -> Verdict:
    """Replay each transactional id's calls through the spec's coordinator (module docstring)."""
    calls = coordinator_calls(ops, txns)
    nodes = 0
    for tid, mine in sorted(calls.items()):
        names = {t.name for _, t in mine if t is not None}
        instances = {int(op.invoke.value.get("instance", -1)) for op, _ in mine if op.f == "init"}
        replay = _Replay(tid, mine, {i: tv_of_tid.get(tid, 1) for i in instances}, cluster_tv,
                         {n: d for n, d in decisions.items() if n in names}, budget)
        try:
            found = replay.search()
            complete = True
        except _Budget:
            found, complete = None, False
        nodes += replay.nodes
        if found is None:
            index, why, closest = replay.deepest
            op = mine[index][0] if index < len(mine) else None
            return Verdict(False, complete, len(calls), sum(map(len, calls.values())), nodes,
                           f"{tid}" + (f" at event {op.invoke.index}" if op is not None else " after its last call"),
                           why if complete else f"inconclusive: the budget of {budget:,} nodes ran out ({why})",
                           op.invoke.index if op is not None else None, closest)
    return Verdict(True, True, len(calls), sum(map(len, calls.values())), nodes)
