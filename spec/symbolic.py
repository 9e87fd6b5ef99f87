"""The z3 twin of the spec: one transactional id, its coordinator metadata and two partition leaders.

System
    The coordinator's :class:`~txnspec.spec.coordinator_state.TxnMetadata` for one transactional id (state,
    producer id, epoch, last epoch, transaction version, partitions in memory and in the last
    transaction-log record, the coordinator epoch) and, per partition, the leader's producer-state entry
    for that producer id (epoch, coordinator epoch, the last batch's sequence range, the open
    transaction's first offset) and its log end offset (so the LSO is ``txn_first`` when a transaction
    is open, the log end otherwise). Epochs, sequences and offsets are unbounded integers. Ghost
    variables summarise the log for the invariants (the largest appended (epoch, seq), flags for a
    non-increasing or non-contiguous append, a transaction holding data appended at a fenced epoch, a
    commit marker over such data, an illegal coordinator transition, a commit decided for a fenced
    producer). Requests of the client and of zombie instances are nondeterministic parameters of the
    transitions (any producer id, epoch, sequence, record count).

Actions (named as the explicit spec's handlers and system steps)
    ``InitProducerId`` (``handle_init_producer_id``), ``AddPartitionsToTxn``
    (``handle_add_partitions_to_txn``), ``EndTxn`` (``handle_end_txn``, TV1 and TV2 paths),
    ``WriteTxnMarkers`` (``append_end_txn_marker`` on one partition and
    ``handle_write_txn_markers_response``: the last one writes Complete*), ``Produce`` (the leader's
    verification then ``append_data``), ``timeout`` (``abort_timed_out_transaction``) and
    ``failover`` (``coordinator_failover``).

Assumptions
    * As in the explicit spec, a coordinator request is one atomic step (check, prepare, log append,
      completion); between steps a Prepare* state always has its markers pending (pending state
      Complete*), so the handlers' ``CONCURRENT_TRANSACTIONS`` checks are "the state is Prepare*".
    * Log appends of the coordinator never fail (``append_error`` NONE): no failed fence, no
      ``has_failed_epoch_fence``.
    * Epochs are unbounded: the epoch is never exhausted, so there is no producer-id rotation (one
      producer id, allocated by the first ``InitProducerId``) and ``next_producer_id`` stays -1.
      Sequences never wrap (``max_sequence`` is infinite). The agreement test samples the explicit
      handlers below these bounds.
    * The partition leader keeps the last batch only (Kafka keeps 5): a retry of an older batch is
      rejected by the sequence check instead of answered as a duplicate; the successor state is the
      same (nothing is appended), only the response differs.
    * A transactional produce is verified as the TV1 leader does (``transaction.partition.verification``):
      it continues the partition's open transaction at the same epoch, or the coordinator has the
      partition in its Ongoing transaction at that epoch. The TV2 implicit AddPartitions is the
      client's ``AddPartitionsToTxn`` step.
    * The coordinator runs transaction version 2 (``CoordinatorConfig.transaction_version``) for the
      aborts it starts itself; clients choose TV1 or TV2 per request.
    * A marker the leader rejects is not a step (Kafka gives up on it and the transaction stays prepared
      until a failover re-sends the markers).

Not modelled
    Dead (transactional-id expiration), producer-id rotation at epoch exhaustion, sequence wrap, the
    aborted-transaction index and fetches, replication (the high watermark follows the log end), the
    consumer group and offsets, clocks and transaction timeouts (``timeout`` may fire at any time).

Properties proved by :func:`proofs` (each with the strengthening invariants it needs): see the
``PROOFS`` table at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import z3

from txnspec.checker.symbolic import Invariant, StepInvariant, SymbolicModel, Transition, Vars, decode_frame
from txnspec.spec.coordinator_state import CoordinatorState, PendingCompletion, TxnMetadata, TxnTransit
from txnspec.spec.messages import TransactionResult
from txnspec.spec.partition import BatchMetadata, PartitionState, ProducerStateEntry
from txnspec.spec.txn_metadata import prepare_complete
from txnspec.spec.txn_state import STATE_IDS, VALID_PREVIOUS_STATES, TxnState

TID = "txn"
PARTITIONS = ("p0", "p1")
TIMEOUT_MS = 60_000

# The state is an Int holding Kafka's TransactionStatus id (STATE_IDS): linear integer arithmetic only,
# which z3 solves much faster than a datatype in deep unrollings.
_STATE_SORT = z3.IntSort()
STATE = {s: z3.IntVal(STATE_IDS[s]) for s in TxnState}
_STATE_NAMES = {STATE_IDS[s]: s.value for s in TxnState}
EMPTY, ONGOING = STATE[TxnState.EMPTY], STATE[TxnState.ONGOING]
PREPARE_COMMIT, PREPARE_ABORT = STATE[TxnState.PREPARE_COMMIT], STATE[TxnState.PREPARE_ABORT]
COMPLETE_COMMIT, COMPLETE_ABORT = STATE[TxnState.COMPLETE_COMMIT], STATE[TxnState.COMPLETE_ABORT]

BUGS = ("zombie-not-fenced", "no-duplicate-detection")

INT, BOOL = z3.IntSort(), z3.BoolSort()


def _pv(name: str, i: int) -> str:
    return f"{name}[{PARTITIONS[i]}]"


COORDINATOR_VARS: dict[str, z3.SortRef] = {
    "exists": BOOL, "state": _STATE_SORT, "producer_id": INT, "next_producer_id": INT, "producer_epoch": INT,
    "last_producer_epoch": INT, "tv2": BOOL, "coordinator_epoch": INT,
}
PARTITION_VARS: dict[str, z3.SortRef] = {
    "part": BOOL, "logged_part": BOOL,  # in the metadata's partitions; in the last transaction-log record
    "entry_epoch": INT, "entry_coordinator_epoch": INT, "last_first_seq": INT, "last_seq": INT, "txn_first_offset": INT,
    "log_end_offset": INT,
}
GHOST_VARS: dict[str, z3.SortRef] = {"illegal": BOOL, "fenced_commit": BOOL, "txn_epoch": INT}
PARTITION_GHOSTS: dict[str, z3.SortRef] = {
    "hi_epoch": INT, "hi_seq": INT, "regress": BOOL, "gap": BOOL, "fenced_txn": BOOL, "bad_commit": BOOL,
}


def _variables(n: int) -> dict[str, z3.SortRef]:
    out: dict[str, z3.SortRef] = {**COORDINATOR_VARS, **GHOST_VARS}
    for i in range(n):
        for name, sort in {**PARTITION_VARS, **PARTITION_GHOSTS}.items():
            out[_pv(name, i)] = sort
    return out


def _valid(src: Any, target: TxnState) -> Any:
    """``src`` is in Kafka's valid-previous-states table for ``target`` (``TransactionState``)."""
    return z3.Or(*(src == STATE[s] for s in VALID_PREVIOUS_STATES[target]))


def _is(src: Any, *states: Any) -> Any:
    return z3.Or(*(src == s for s in states))


@dataclass(frozen=True)
class _Coord:
    """A candidate coordinator successor: expressions for the modified coordinator fields."""

    exists: Any
    state: Any
    producer_id: Any
    next_producer_id: Any
    epoch: Any
    last: Any
    tv2: Any
    parts: tuple[Any, ...]
    logged: tuple[Any, ...]
    illegal: Any
    fenced_commit: Any
    txn_epoch: Any


_COORD_MODIFIES = ("exists", "state", "producer_id", "next_producer_id", "producer_epoch", "last_producer_epoch",
                   "tv2", "illegal", "fenced_commit", "txn_epoch")


def _current(c: Vars, n: int) -> _Coord:
    return _Coord(c["exists"], c["state"], c["producer_id"], c["next_producer_id"], c["producer_epoch"],
                  c["last_producer_epoch"], c["tv2"], tuple(c[_pv("part", i)] for i in range(n)),
                  tuple(c[_pv("logged_part", i)] for i in range(n)), c["illegal"], c["fenced_commit"],
                  c["txn_epoch"])


def _choose(cond: Any, a: _Coord, b: _Coord) -> _Coord:
    def pick(x: Any, y: Any) -> Any:
        return z3.If(cond, x, y)
    return _Coord(pick(a.exists, b.exists), pick(a.state, b.state), pick(a.producer_id, b.producer_id),
                  pick(a.next_producer_id, b.next_producer_id), pick(a.epoch, b.epoch), pick(a.last, b.last),
                  pick(a.tv2, b.tv2), tuple(pick(x, y) for x, y in zip(a.parts, b.parts, strict=True)),
                  tuple(pick(x, y) for x, y in zip(a.logged, b.logged, strict=True)), pick(a.illegal, b.illegal),
                  pick(a.fenced_commit, b.fenced_commit), pick(a.txn_epoch, b.txn_epoch))


def _assign(nx: Vars, v: _Coord, n: int) -> Any:
    eqs = [nx["exists"] == v.exists, nx["state"] == v.state, nx["producer_id"] == v.producer_id,
           nx["next_producer_id"] == v.next_producer_id, nx["producer_epoch"] == v.epoch,
           nx["last_producer_epoch"] == v.last, nx["tv2"] == v.tv2, nx["illegal"] == v.illegal,
           nx["fenced_commit"] == v.fenced_commit, nx["txn_epoch"] == v.txn_epoch]
    for i in range(n):
        eqs += [nx[_pv("part", i)] == v.parts[i], nx[_pv("logged_part", i)] == v.logged[i]]
    return z3.And(*eqs)


def _coord_modifies(n: int) -> tuple[str, ...]:
    return (*_COORD_MODIFIES, *(_pv(x, i) for i in range(n) for x in ("part", "logged_part")))


def _prepare(md: _Coord, target: Any, target_state: TxnState, *, epoch: Any, last: Any, tv2: Any) -> _Coord:
    """``prepareAbortOrCommit`` + log append + completion, then ``prepareComplete`` (markers pending)."""
    return replace(md, state=target, epoch=epoch, last=last, tv2=tv2, logged=md.parts,
                   illegal=z3.Or(md.illegal, z3.Not(_valid(md.state, target_state))))


def _abort_empty(md: _Coord) -> _Coord:
    """TV2 abort with no partitions: PrepareAbort with epoch + 1, completed at once (no markers)."""
    no_parts = tuple(z3.BoolVal(False) for _ in md.parts)
    return replace(md, state=COMPLETE_ABORT, epoch=md.epoch + 1, last=md.epoch, tv2=z3.BoolVal(True),
                   parts=no_parts, logged=no_parts,
                   illegal=z3.Or(md.illegal, z3.Not(_valid(md.state, TxnState.PREPARE_ABORT))))


def _fence_and_abort(md: _Coord) -> _Coord:
    """``prepareFenceProducerEpoch`` then the coordinator's own TV2 abort: PrepareAbort at epoch + 1."""
    valid = z3.And(_valid(md.state, TxnState.PREPARE_EPOCH_FENCE), _valid(md.state, TxnState.PREPARE_ABORT))
    return replace(md, state=PREPARE_ABORT, epoch=md.epoch + 1, last=md.epoch, tv2=z3.BoolVal(True),
                   logged=md.parts, illegal=z3.Or(md.illegal, z3.Not(valid)))


def _prepare_state(s: Any) -> Any:
    return _is(s, PREPARE_COMMIT, PREPARE_ABORT)


# --- transitions ---------------------------------------------------------------------------------

def _init_producer_id(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.If(p["expected"], z3.And(p["pid"] >= 0, p["epoch"] >= 0), z3.BoolVal(True))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        cur = _current(c, n)
        no_parts = tuple(z3.BoolVal(False) for _ in range(n))
        created = replace(cur, exists=z3.BoolVal(True), state=EMPTY, producer_id=c["next_producer_id"],
                          epoch=z3.IntVal(-1), last=z3.IntVal(-1), tv2=z3.BoolVal(False), parts=no_parts,
                          logged=no_parts)
        md = _choose(c["exists"], cur, created)
        alloc = z3.If(c["exists"], c["next_producer_id"], c["next_producer_id"] + 1)
        md = replace(md, next_producer_id=alloc)
        fenced = z3.And(p["expected"], md.epoch != -1, p["pid"] != md.producer_id)
        fail = z3.Or(_prepare_state(md.state), fenced)
        fence = _fence_and_abort(md)
        # prepareIncrementProducerEpoch
        bump = z3.Or(z3.Not(p["expected"]), md.epoch == -1, p["epoch"] == md.epoch)
        retry = z3.And(p["expected"], p["epoch"] == md.last)
        bumped = replace(md, state=EMPTY, epoch=z3.If(bump, md.epoch + 1, md.epoch),
                         last=z3.If(bump, z3.If(p["expected"], md.epoch, -1), md.last),
                         parts=no_parts, logged=no_parts,
                         illegal=z3.Or(md.illegal, z3.Not(_valid(md.state, TxnState.EMPTY))))
        idle = _is(md.state, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
        illegal = replace(md, illegal=z3.BoolVal(True))  # Dead, PrepareEpochFence: Kafka throws
        out = _choose(fail, md, _choose(md.state == ONGOING, fence,
                                        _choose(idle, _choose(z3.Or(bump, retry), bumped, md), illegal)))
        return _assign(nx, out, n)

    return Transition("InitProducerId", guard, update, _coord_modifies(n),
                      {"expected": BOOL, "pid": INT, "epoch": INT})


def _add_partitions(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.And(p["epoch"] >= 0, z3.Or(*(p[f"add{i}"] for i in range(n))))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        md = _current(c, n)
        add = [p[f"add{i}"] for i in range(n)]
        subset = z3.And(*(z3.Implies(add[i], md.parts[i]) for i in range(n)))
        ok = z3.And(md.exists, z3.Not(_prepare_state(md.state)), md.producer_id == p["pid"], md.epoch == p["epoch"],
                    z3.Not(z3.And(md.state == ONGOING, subset)))
        parts = tuple(z3.Or(md.parts[i], add[i]) for i in range(n))
        added = replace(md, state=ONGOING, parts=parts, logged=parts, tv2=p["tv2"], txn_epoch=md.epoch,
                        illegal=z3.Or(md.illegal, z3.Not(_valid(md.state, TxnState.ONGOING))))
        return _assign(nx, _choose(ok, added, md), n)

    params: dict[str, z3.SortRef] = {"pid": INT, "epoch": INT, "tv2": BOOL, **{f"add{i}": BOOL for i in range(n)}}
    return Transition("AddPartitionsToTxn", guard, update, _coord_modifies(n), params)


def _end_txn(n: int, zombie_not_fenced: bool) -> Transition:
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        md = _current(c, n)
        commit = p["commit"]
        epoch = p["epoch"]
        if zombie_not_fenced:  # the bug: the coordinator takes the epoch from its metadata
            epoch = z3.If(md.producer_id == p["pid"], md.epoch, p["epoch"])
        base = z3.And(md.exists, z3.Not(_prepare_state(md.state)), md.producer_id == p["pid"])
        target = z3.If(commit, PREPARE_COMMIT, PREPARE_ABORT)
        valid_target = z3.If(commit, _valid(md.state, TxnState.PREPARE_COMMIT),
                             _valid(md.state, TxnState.PREPARE_ABORT))

        def prepared(new_epoch: Any, new_last: Any, tv2: Any) -> _Coord:
            out = replace(md, state=target, epoch=new_epoch, last=new_last, tv2=tv2, logged=md.parts,
                          illegal=z3.Or(md.illegal, z3.Not(valid_target)))
            return replace(out, fenced_commit=z3.Or(md.fenced_commit, z3.And(commit, p["epoch"] < md.epoch)))

        # TV2 (_decide_end_txn_v2): Prepare* is pending, so only Ongoing, Complete* and Empty act
        retry = md.epoch == epoch + 1
        complete = _is(md.state, COMPLETE_COMMIT, COMPLETE_ABORT)
        valid_epoch = z3.If(complete, z3.Or(retry, epoch == md.epoch), epoch == md.epoch)
        v2_ongoing = prepared(md.epoch + 1, md.epoch, z3.BoolVal(True))
        v2_abort_again = z3.And(z3.Not(commit), z3.Not(retry),
                                _is(md.state, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT))
        v2 = _choose(z3.And(base, valid_epoch, md.state == ONGOING), v2_ongoing,
                     _choose(z3.And(base, valid_epoch, v2_abort_again), _abort_empty(md), md))
        # TV1 (_decide_end_txn_v1): strict epoch; only Ongoing acts
        v1 = _choose(z3.And(base, epoch == md.epoch, md.state == ONGOING),
                     prepared(md.epoch, md.last, z3.BoolVal(False)), md)
        return _assign(nx, _choose(p["tv2"], v2, v1), n)

    return Transition("EndTxn", lambda c, p: p["epoch"] >= 0, update, _coord_modifies(n),
                      {"pid": INT, "epoch": INT, "commit": BOOL, "tv2": BOOL})


def marker_accepted(c: Vars, i: int) -> Any:
    """``append_end_txn_marker``'s checks for the marker the coordinator sends now to partition ``i``."""
    e, pe = c["producer_epoch"], c[_pv("entry_epoch", i)]
    retry = z3.And(e == pe, c[_pv("txn_first_offset", i)] == -1)
    epoch_ok = z3.If(c["tv2"], z3.Not(z3.And(e <= pe, z3.Not(retry))), e >= pe)
    return z3.And(epoch_ok, z3.Not(c[_pv("entry_coordinator_epoch", i)] > c["coordinator_epoch"]))


def _write_txn_markers(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.And(c["exists"], _prepare_state(c["state"]), z3.Or(*(
            z3.And(p["partition"] == i, c[_pv("part", i)], marker_accepted(c, i)) for i in range(n))))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        commit = c["state"] == PREPARE_COMMIT
        e, ce = c["producer_epoch"], c["coordinator_epoch"]
        eqs = []
        for i in range(n):
            def pv(x: str, i: int = i) -> Any:
                return c[_pv(x, i)]

            def nv(x: str, i: int = i) -> Any:
                return nx[_pv(x, i)]
            me = p["partition"] == i
            bumped = e != pv("entry_epoch")
            eqs += [
                nv("entry_epoch") == z3.If(me, e, pv("entry_epoch")),
                nv("entry_coordinator_epoch") == z3.If(me, ce, pv("entry_coordinator_epoch")),
                nv("last_first_seq") == z3.If(z3.And(me, bumped), -1, pv("last_first_seq")),
                nv("last_seq") == z3.If(z3.And(me, bumped), -1, pv("last_seq")),
                nv("txn_first_offset") == z3.If(me, -1, pv("txn_first_offset")),
                nv("log_end_offset") == z3.If(me, pv("log_end_offset") + 1, pv("log_end_offset")),
                nv("part") == z3.And(z3.Not(me), pv("part")),
                nv("fenced_txn") == z3.And(z3.Not(me), pv("fenced_txn")),
                nv("bad_commit") == z3.Or(pv("bad_commit"), z3.And(me, commit, pv("fenced_txn"))),
            ]
        last = z3.And(*(z3.Or(p["partition"] == i, z3.Not(c[_pv("part", i)])) for i in range(n)))
        done = z3.If(commit, COMPLETE_COMMIT, COMPLETE_ABORT)
        eqs.append(nx["state"] == z3.If(last, done, c["state"]))
        eqs += [nx[_pv("logged_part", i)] == z3.If(last, False, c[_pv("logged_part", i)]) for i in range(n)]
        return z3.And(*eqs)

    modifies = ("state", *(_pv(x, i) for i in range(n) for x in (
        "entry_epoch", "entry_coordinator_epoch", "last_first_seq", "last_seq", "txn_first_offset",
        "log_end_offset", "part", "logged_part", "fenced_txn", "bad_commit")))
    return Transition("WriteTxnMarkers", guard, update, modifies, {"partition": INT})


def _produce(n: int, detect_duplicates: bool, validate_sequence: bool) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        # any instance of the producer, current or zombie: an epoch the coordinator has handed out
        return z3.And(c["exists"], p["partition"] >= 0, p["partition"] < n, p["epoch"] >= 0,
                      p["epoch"] <= c["producer_epoch"], p["first_seq"] >= 0, p["count"] >= 1)

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        e, f, count, txn = p["epoch"], p["first_seq"], p["count"], p["transactional"]
        last = f + count - 1
        eqs = []
        for i in range(n):
            def pv(x: str, i: int = i) -> Any:
                return c[_pv(x, i)]

            def nv(x: str, i: int = i) -> Any:
                return nx[_pv(x, i)]
            pe, is_open = pv("entry_epoch"), pv("txn_first_offset") != -1
            verified = z3.Or(z3.Not(txn), z3.And(is_open, pe == e),  # system._verify_transactional_produce
                             z3.And(z3.Not(_prepare_state(c["state"])), pv("part"), c["producer_epoch"] == e))
            duplicate = z3.And(pe == e, pv("last_first_seq") == f, pv("last_seq") == last) \
                if detect_duplicates else z3.BoolVal(False)
            bad_seq = z3.If(e != pe, z3.And(f != 0, pe != -1), z3.Not(z3.Or(pe == -1, f == pv("last_seq") + 1))) \
                if validate_sequence else z3.BoolVal(False)
            ok = z3.And(p["partition"] == i, verified, z3.Not(duplicate), e >= pe, z3.Not(bad_seq),
                        z3.Not(z3.And(is_open, z3.Not(txn))))
            hi_e, hi_s = pv("hi_epoch"), pv("hi_seq")
            fenced = z3.And(e < c["producer_epoch"],
                            z3.Not(z3.And(c["state"] == PREPARE_COMMIT, e == c["txn_epoch"])))
            eqs += [
                nv("entry_epoch") == z3.If(ok, e, pe),
                nv("last_first_seq") == z3.If(ok, f, pv("last_first_seq")),
                nv("last_seq") == z3.If(ok, last, pv("last_seq")),
                nv("txn_first_offset") == z3.If(z3.And(ok, txn, z3.Not(is_open)), pv("log_end_offset"),
                                                pv("txn_first_offset")),
                nv("log_end_offset") == z3.If(ok, pv("log_end_offset") + count, pv("log_end_offset")),
                nv("hi_epoch") == z3.If(ok, e, hi_e),
                nv("hi_seq") == z3.If(ok, last, hi_s),
                nv("regress") == z3.Or(pv("regress"), z3.And(ok, hi_e != -1, z3.Or(
                    e < hi_e, z3.And(e == hi_e, f <= hi_s)))),
                nv("gap") == z3.Or(pv("gap"), z3.And(ok, hi_e != -1, e == hi_e, f != hi_s + 1)),
                nv("fenced_txn") == z3.Or(pv("fenced_txn"), z3.And(ok, txn, fenced)),
            ]
        return z3.And(*eqs)

    modifies = tuple(_pv(x, i) for i in range(n) for x in (
        "entry_epoch", "last_first_seq", "last_seq", "txn_first_offset", "log_end_offset", "hi_epoch", "hi_seq",
        "regress", "gap", "fenced_txn"))
    return Transition("Produce", guard, update, modifies,
                      {"partition": INT, "epoch": INT, "first_seq": INT, "count": INT, "transactional": BOOL})


def _timeout(n: int) -> Transition:
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        return _assign(nx, _fence_and_abort(_current(c, n)), n)
    return Transition("timeout", lambda c, p: z3.And(c["exists"], c["state"] == ONGOING), update, _coord_modifies(n))


def _failover(n: int) -> Transition:
    """``coordinator_failover``: coordinator epoch + 1; the cache is reloaded from the last log record
    (its partitions, ``last_producer_epoch`` -1); a Prepare* re-sends markers to all its partitions."""
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        eqs = [nx["coordinator_epoch"] == c["coordinator_epoch"] + 1,
               nx["last_producer_epoch"] == z3.If(c["exists"], -1, c["last_producer_epoch"])]
        eqs += [nx[_pv("part", i)] == c[_pv("logged_part", i)] for i in range(n)]
        return z3.And(*eqs)
    return Transition("failover", lambda c, p: z3.BoolVal(True), update,
                      ("coordinator_epoch", "last_producer_epoch", *(_pv("part", i) for i in range(n))))


# --- the model -------------------------------------------------------------------------------------

def _init(n: int) -> Callable[[Vars], Any]:
    def init(s: Vars) -> Any:
        eqs = [z3.Not(s["exists"]), s["state"] == EMPTY, s["producer_id"] == -1, s["next_producer_id"] == 0,
               s["producer_epoch"] == -1, s["last_producer_epoch"] == -1, z3.Not(s["tv2"]),
               s["coordinator_epoch"] == 0, z3.Not(s["illegal"]), z3.Not(s["fenced_commit"]), s["txn_epoch"] == -1]
        for i in range(n):
            for x in ("part", "logged_part", "regress", "gap", "fenced_txn", "bad_commit"):
                eqs.append(z3.Not(s[_pv(x, i)]))
            for x in ("entry_epoch", "entry_coordinator_epoch", "last_first_seq", "last_seq", "txn_first_offset",
                      "hi_epoch", "hi_seq"):
                eqs.append(s[_pv(x, i)] == -1)
            eqs.append(s[_pv("log_end_offset", i)] == 0)
        return z3.And(*eqs)
    return init


def decode(model: z3.ModelRef, frame: Vars) -> dict[str, Any]:
    """A z3 model's values for one frame: ints, bools, and the coordinator state by Kafka's name."""
    values = decode_frame(model, frame)
    values["state"] = _STATE_NAMES.get(values["state"], str(values["state"]))
    return values


def _domain(s: Vars) -> Any:
    return z3.And(s["state"] >= 0, s["state"] <= max(STATE_IDS.values()))


def build(n_partitions: int = 2, *, buggy: str | None = None) -> SymbolicModel:
    """The symbolic model for one transactional id and ``n_partitions`` (1 or 2) partitions.

    ``buggy`` selects a known-bad variant: ``"zombie-not-fenced"`` (EndTxn without the epoch check,
    the explicit ``zombie-not-fenced`` variant) or ``"no-duplicate-detection"`` (``append_data`` with
    ``detect_duplicates=False, validate_sequence=False``, the explicit ``no-duplicate-detection``).
    """
    if not 1 <= n_partitions <= len(PARTITIONS):
        raise ValueError(f"n_partitions must be 1..{len(PARTITIONS)}")
    if buggy is not None and buggy not in BUGS:
        raise ValueError(f"unknown bug {buggy!r} (known: {', '.join(BUGS)})")
    n = n_partitions
    no_dup = buggy == "no-duplicate-detection"
    transitions = [
        _init_producer_id(n), _add_partitions(n), _end_txn(n, buggy == "zombie-not-fenced"), _write_txn_markers(n),
        _produce(n, detect_duplicates=not no_dup, validate_sequence=not no_dup), _timeout(n), _failover(n),
    ]
    return SymbolicModel(_variables(n), _init(n), transitions, decode, _domain)


# --- invariants and their strengthening -------------------------------------------------------------

def _all(n: int, f: Callable[[int], Any]) -> Any:
    return z3.And(*(f(i) for i in range(n)))


def last_stable_offset(s: Vars, i: int) -> Any:
    """``PartitionState.last_stable_offset`` with the high watermark at the log end: the first offset of the
    open transaction, else the log end offset (one producer id per leader here)."""
    first = s[_pv("txn_first_offset", i)]
    return z3.If(first != -1, first, s[_pv("log_end_offset", i)])


def invariants(n: int = 2) -> dict[str, Invariant | StepInvariant]:
    """The properties, named as the explicit spec's (``spec/properties.py``) where one exists."""
    def pv(s: Vars, x: str, i: int) -> Any:
        return s[_pv(x, i)]

    return {
        "epochs_never_decrease": StepInvariant(
            "epochs_never_decrease",
            lambda c, nx: z3.And(nx["producer_epoch"] >= c["producer_epoch"],
                                 nx["coordinator_epoch"] >= c["coordinator_epoch"],
                                 _all(n, lambda i: pv(nx, "entry_epoch", i) >= pv(c, "entry_epoch", i))),
            "The coordinator's epoch for the id, the coordinator epoch and every leader's entry epoch never go down."),
        "no_duplicate_append": Invariant(
            "no_duplicate_append", lambda s: _all(n, lambda i: z3.Not(pv(s, "regress", i))),
            "Every append is strictly after every earlier (epoch, seq) of the producer on the partition, so no "
            "(pid, epoch, seq) is appended twice."),
        "sequences_contiguous": Invariant(
            "sequences_contiguous", lambda s: _all(n, lambda i: z3.Not(pv(s, "gap", i))),
            "Within one epoch each batch starts at the last appended sequence + 1."),
        "fenced_appends_never_commit": Invariant(
            "fenced_appends_never_commit", lambda s: _all(n, lambda i: z3.Not(pv(s, "bad_commit", i))),
            "A commit marker never closes a transaction holding data appended at an epoch the coordinator had "
            "already fenced. 'Fenced at append' is the explicit ghost's rule (epoch below the coordinator's, "
            "except the PrepareCommit transaction's own epoch) with the transaction's epoch kept in a ghost "
            "(txn_epoch) rather than read from last_producer_epoch, which a failover resets to -1."),
        "fenced_producer_never_commits": Invariant(
            "fenced_producer_never_commits", lambda s: z3.Not(s["fenced_commit"]),
            "No commit is decided on an EndTxn whose epoch is older than the coordinator's."),
        "valid_coordinator_transitions": Invariant(
            "valid_coordinator_transitions", lambda s: z3.Not(s["illegal"]),
            "Every coordinator transition is in Kafka's valid-previous-states table."),
        "last_stable_offset_never_decreases": StepInvariant(
            "last_stable_offset_never_decreases",
            lambda c, nx: _all(n, lambda i: last_stable_offset(nx, i) >= last_stable_offset(c, i)),
            "A leader's LSO (the open transaction's first offset, else the log end) never goes back, so a "
            "read_committed consumer never sees the stable prefix shrink."),
        "prepare_never_reversed": StepInvariant(
            "prepare_never_reversed",
            lambda c, nx: z3.And(
                z3.Implies(c["state"] == PREPARE_COMMIT, _is(nx["state"], PREPARE_COMMIT, COMPLETE_COMMIT)),
                z3.Implies(c["state"] == PREPARE_ABORT, _is(nx["state"], PREPARE_ABORT, COMPLETE_ABORT))),
            "A PrepareCommit is followed only by CompleteCommit, a PrepareAbort only by CompleteAbort."),
    }


def strengthening(n: int = 2) -> dict[str, Invariant]:
    """Auxiliary invariants; each is proved along with the property that needs it."""
    def pv(s: Vars, x: str, i: int) -> Any:
        return s[_pv(x, i)]

    def idle(s: Vars) -> Any:
        return _is(s["state"], EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)

    return {
        # Before the first InitProducerId nothing exists: epoch -1, no partitions, leaders know no producer.
        # (Creation starts from these values; without it an arbitrary pre-state could have a leader ahead.)
        "absent_is_initial": Invariant("absent_is_initial", lambda s: z3.Implies(z3.Not(s["exists"]), z3.And(
            s["state"] == EMPTY, s["producer_epoch"] == -1,
            _all(n, lambda i: z3.And(z3.Not(pv(s, "part", i)), z3.Not(pv(s, "logged_part", i)),
                                     pv(s, "entry_epoch", i) == -1, pv(s, "txn_first_offset", i) == -1,
                                     z3.Not(pv(s, "fenced_txn", i)))))),
            "Before the first InitProducerId the id has no metadata and no leader has state for it."),
        # The leader's entry is at or ahead of everything appended; at the same epoch it remembers the last one.
        "entry_ahead_of_log": Invariant("entry_ahead_of_log", lambda s: _all(n, lambda i: z3.And(
            pv(s, "entry_epoch", i) >= pv(s, "hi_epoch", i),
            z3.Implies(pv(s, "entry_epoch", i) == pv(s, "hi_epoch", i),
                       pv(s, "last_seq", i) == pv(s, "hi_seq", i)))),
            "A leader's entry epoch is >= the epoch of the last appended batch and, when equal, its last "
            "sequence is that batch's: the epoch and sequence checks then reject any non-increasing append."),
        "offsets_ordered": Invariant("offsets_ordered", lambda s: _all(n, lambda i: z3.And(
            pv(s, "log_end_offset", i) >= 0,
            z3.Or(pv(s, "txn_first_offset", i) == -1,
                  z3.And(pv(s, "txn_first_offset", i) >= 0,
                         pv(s, "txn_first_offset", i) < pv(s, "log_end_offset", i))))),
            "An open transaction starts at an offset below the log end (its first batch is in the log)."),
        "no_unreachable_state": Invariant("no_unreachable_state", lambda s: z3.Not(_is(
            s["state"], STATE[TxnState.DEAD], STATE[TxnState.PREPARE_EPOCH_FENCE])),
            "Dead is not modelled and PrepareEpochFence never outlives a step."),
        "idle_has_no_partitions": Invariant("idle_has_no_partitions", lambda s: z3.Implies(idle(s), _all(
            n, lambda i: z3.And(z3.Not(pv(s, "part", i)), z3.Not(pv(s, "logged_part", i))))),
            "Empty and Complete* have no partitions, in memory or in the log."),
        "logged_covers_memory": Invariant("logged_covers_memory", lambda s: _all(
            n, lambda i: z3.Implies(pv(s, "part", i), pv(s, "logged_part", i))),
            "Markers remove partitions in memory only: the log record's partitions include the cache's, "
            "so a failover never forgets a partition still waiting for its marker."),
        "open_txn_known": Invariant("open_txn_known", lambda s: _all(n, lambda i: z3.Implies(
            pv(s, "txn_first_offset", i) != -1,
            z3.And(s["exists"], pv(s, "part", i), _is(s["state"], ONGOING, PREPARE_COMMIT, PREPARE_ABORT)))),
            "A transaction open on a leader is in the coordinator's transaction, which is Ongoing or Prepare*."),
        "ongoing_at_txn_epoch": Invariant("ongoing_at_txn_epoch", lambda s: z3.Implies(
            s["state"] == ONGOING, s["txn_epoch"] == s["producer_epoch"]),
            "An Ongoing transaction runs at the coordinator's current epoch."),
        "open_txn_epoch": Invariant("open_txn_epoch", lambda s: _all(n, lambda i: z3.Implies(
            z3.And(pv(s, "txn_first_offset", i) != -1, _is(s["state"], ONGOING, PREPARE_COMMIT)),
            pv(s, "entry_epoch", i) == s["txn_epoch"])),
            "A leader's open transaction in an Ongoing or PrepareCommit transaction is at the transaction's epoch, "
            "so a batch that continues it is not fenced."),
        "fenced_only_in_abort": Invariant("fenced_only_in_abort", lambda s: _all(n, lambda i: z3.Implies(
            pv(s, "fenced_txn", i),
            z3.And(s["state"] == PREPARE_ABORT, pv(s, "part", i), pv(s, "txn_first_offset", i) != -1))),
            "Data appended at a fenced epoch sits only in a transaction the coordinator is aborting; "
            "its marker on that partition is an abort."),
    }


@dataclass(frozen=True)
class Proof:
    prop: str
    helpers: tuple[str, ...]
    explanation: str


PROOFS: dict[str, Proof] = {p.prop: p for p in (
    Proof("epochs_never_decrease", ("absent_is_initial",),
          "Every update keeps or bumps the epoch; the leaders accept only epochs >= their entry's. The first "
          "InitProducerId starts from epoch -1, which needs absent_is_initial."),
    Proof("no_duplicate_append", ("entry_ahead_of_log", "absent_is_initial"),
          "An append at the entry's epoch is either the last batch again (found by the duplicate check) or must "
          "follow its last sequence; entry_ahead_of_log says that last sequence is the largest appended."),
    Proof("sequences_contiguous", ("entry_ahead_of_log", "absent_is_initial"),
          "The sequence check at the entry's epoch is exactly contiguity with the last appended batch."),
    Proof("fenced_appends_never_commit", (
        "absent_is_initial", "no_unreachable_state", "idle_has_no_partitions", "logged_covers_memory",
        "open_txn_known", "ongoing_at_txn_epoch", "open_txn_epoch", "fenced_only_in_abort"),
          "A fenced append can only continue an open transaction (verification needs the current epoch). In "
          "Ongoing or PrepareCommit that transaction is at the transaction's epoch (not fenced), so it is "
          "PrepareAbort; it stays so until this partition's (abort) marker clears the flag."),
    Proof("fenced_producer_never_commits", (),
          "Both EndTxn paths move Ongoing to PrepareCommit only for the coordinator's current epoch."),
    Proof("valid_coordinator_transitions", ("no_unreachable_state", "absent_is_initial"),
          "Each handler's target is in the table from the states it acts in; Dead and PrepareEpochFence "
          "are never a state between steps."),
    Proof("last_stable_offset_never_decreases", ("offsets_ordered",),
          "Opening a transaction sets its first offset to the log end (the LSO until then); a marker closes it "
          "and the LSO jumps to the new log end, which offsets_ordered puts above the first offset."),
    Proof("prepare_never_reversed", ("absent_is_initial",),
          "In Prepare* every request answers CONCURRENT_TRANSACTIONS (markers pending); only the last marker "
          "moves it, to the matching Complete*."),
)}


def proofs(n: int = 2) -> dict[str, tuple[Invariant | StepInvariant, list[Invariant]]]:
    invs, helpers = invariants(n), strengthening(n)
    return {name: (invs[name], [helpers[h] for h in p.helpers]) for name, p in PROOFS.items()}


# --- to and from the explicit spec -------------------------------------------------------------------

_STATE_BY_NAME = {s.value: s for s in TxnState}


def to_explicit(values: dict[str, Any], n: int = 2) -> tuple[CoordinatorState, dict[str, PartitionState]]:
    """The explicit coordinator and partition states a decoded symbolic state stands for (``now_ms`` 0)."""
    state = _STATE_BY_NAME[str(values["state"])]
    tv = 2 if values["tv2"] else 0
    cs = CoordinatorState(coordinator_epoch=values["coordinator_epoch"], next_producer_id=values["next_producer_id"])
    pid = values["producer_id"]
    if values["exists"]:
        parts = frozenset(PARTITIONS[i] for i in range(n) if values[_pv("part", i)])
        logged = frozenset(PARTITIONS[i] for i in range(n) if values[_pv("logged_part", i)])
        start = -1 if state is TxnState.EMPTY else 0
        preparing = state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        md = TxnMetadata(TID, pid, pid, -1, values["producer_epoch"], values["last_producer_epoch"], TIMEOUT_MS,
                         state, parts, start, 0, tv)
        transit = TxnTransit(pid, pid, -1, values["producer_epoch"], values["last_producer_epoch"], TIMEOUT_MS,
                             state, logged, start, 0, tv)
        completions: tuple[tuple[str, PendingCompletion], ...] = ()
        if preparing:
            result = TransactionResult.COMMIT if state is TxnState.PREPARE_COMMIT else TransactionResult.ABORT
            complete = prepare_complete(md, 0)
            md = replace(md, pending_state=complete.state)
            completions = ((TID, PendingCompletion(values["coordinator_epoch"], result, complete)),)
        cs = replace(cs, cache=((TID, md),), txn_log=((TID, transit),), completions=completions)
    out: dict[str, PartitionState] = {}
    for i in range(n):
        def v(x: str, i: int = i) -> Any:
            return values[_pv(x, i)]
        leo, first = v("log_end_offset"), v("txn_first_offset")
        batches: tuple[BatchMetadata, ...] = ()
        if v("last_first_seq") != -1:  # the offsets are not encoded (they only echo in a duplicate's response)
            batches = (BatchMetadata(v("last_first_seq"), v("last_seq"), 0, 0),)
        entry = ProducerStateEntry(v("entry_epoch"), v("entry_coordinator_epoch"), batches, first)
        producers = () if entry == ProducerStateEntry() else ((pid, entry),)
        ongoing = ((first, pid),) if first != -1 else ()
        out[PARTITIONS[i]] = PartitionState(log_end_offset=leo, producers=producers, ongoing=ongoing)
    return cs, out


def from_explicit(cs: CoordinatorState, partitions: dict[str, PartitionState], n: int = 2) -> dict[str, Any]:
    """The encoded (non-ghost) fields of explicit states, as :func:`decode` returns them."""
    md = cs.metadata(TID)
    out: dict[str, Any] = {"exists": md is not None, "next_producer_id": cs.next_producer_id,
                           "coordinator_epoch": cs.coordinator_epoch}
    logged: frozenset[str] = frozenset()
    for tid, t in cs.txn_log:
        if tid == TID:
            logged = t.partitions
    if md is not None:
        out.update(state=md.state.value, producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                   last_producer_epoch=md.last_producer_epoch, tv2=md.transaction_version >= 2)
    for i, name in enumerate(PARTITIONS[:n]):
        ps = partitions[name]
        entry = ps.entry(md.producer_id) if md is not None else None
        entry = entry or ProducerStateEntry()
        last = entry.batches[-1] if entry.batches else None
        if md is not None:
            out[_pv("part", i)] = name in md.partitions
            out[_pv("logged_part", i)] = name in logged
        out.update({_pv("entry_epoch", i): entry.producer_epoch,
                    _pv("entry_coordinator_epoch", i): entry.coordinator_epoch,
                    _pv("last_first_seq", i): last.first_seq if last else -1,
                    _pv("last_seq", i): last.last_seq if last else -1,
                    _pv("txn_first_offset", i): entry.current_txn_first_offset,
                    _pv("log_end_offset", i): ps.log_end_offset})
    return out


ENCODED_FIELDS: tuple[str, ...] = (*COORDINATOR_VARS, *(_pv(x, i) for i in range(2) for x in PARTITION_VARS))


def describe_path(path: Sequence[tuple[str, dict[str, Any]]],
                  params: Sequence[dict[str, Any]] = ()) -> list[str]:
    """One line per step of a decoded path: the action, its parameters and the fields that changed."""
    lines: list[str] = []
    prev: dict[str, Any] | None = None
    for j, (name, state) in enumerate(path):
        changed = state if prev is None else {k: v for k, v in state.items() if prev.get(k) != v}
        shown = ", ".join(f"{k}={v}" for k, v in changed.items())
        args = ", ".join(f"{k}={v}" for k, v in params[j].items()) if j < len(params) else ""
        lines.append(f"{name}({args}): {shown}")
        prev = state
    return lines


# --- replaying a symbolic path on the explicit handlers -----------------------------------------------

def explicit_step(cs: CoordinatorState, parts: dict[str, PartitionState], action: str, params: dict[str, Any],
                  protocol: Any = None, n: int = 2) -> tuple[CoordinatorState, dict[str, PartitionState]] | None:
    """One symbolic action with its parameters, run by the explicit handlers of ``protocol`` (a
    :class:`~txnspec.spec.protocol.Protocol`; default the current one). None where the symbolic
    transition is disabled (a marker the leader rejects)."""
    from txnspec.spec.errors import Errors
    from txnspec.spec.messages import AddPartitionsToTxn, EndTxn, InitProducerId
    from txnspec.spec.partition import has_ongoing_transaction
    from txnspec.spec.protocol import CURRENT

    proto = protocol or CURRENT
    md = cs.metadata(TID)
    if action == "InitProducerId":
        pid, epoch = (params["pid"], params["epoch"]) if params["expected"] else (-1, -1)
        cs = proto.handle_init_producer_id(cs, InitProducerId(TID, TIMEOUT_MS, pid, epoch)).state
    elif action == "AddPartitionsToTxn":
        added = frozenset(PARTITIONS[i] for i in range(n) if params[f"add{i}"])
        cs = proto.handle_add_partitions_to_txn(cs, AddPartitionsToTxn(
            TID, params["pid"], params["epoch"], added, 2 if params["tv2"] else 0)).state
    elif action == "EndTxn":
        result = TransactionResult.COMMIT if params["commit"] else TransactionResult.ABORT
        cs = proto.handle_end_txn(cs, EndTxn(TID, params["pid"], params["epoch"], result,
                                             2 if params["tv2"] else 0)).state
    elif action == "timeout":
        cs = proto.abort_timed_out_transaction(cs, TID).state
    elif action == "failover":
        cs = proto.coordinator_failover(cs).state
    elif action == "WriteTxnMarkers" and md is not None:
        name = PARTITIONS[params["partition"]]
        result = TransactionResult.COMMIT if md.state is TxnState.PREPARE_COMMIT else TransactionResult.ABORT
        ps, reply = proto.append_end_txn_marker(parts[name], md.producer_id, md.producer_epoch, cs.coordinator_epoch,
                                                result, md.transaction_version)
        if reply.error is not Errors.NONE:
            return None
        parts = {**parts, name: ps}
        cs = proto.handle_write_txn_markers_response(cs, TID, name, cs.coordinator_epoch, Errors.NONE).state
    elif action == "Produce" and md is not None:
        name = PARTITIONS[params["partition"]]
        ps, e, txn = parts[name], params["epoch"], params["transactional"]
        verified = (not txn or has_ongoing_transaction(ps, md.producer_id, e)
                    or (md.producer_epoch == e and md.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                        and name in md.partitions))
        if verified:
            ps, _ = proto.append_data(ps, md.producer_id, e, params["first_seq"], params["count"], txn)
            parts = {**parts, name: ps}
    else:
        return None
    return cs, parts


def replay_explicit(path: Sequence[tuple[str, dict[str, Any]]], params: Sequence[dict[str, Any]],
                    protocol: Any = None, n: int = 2) -> list[tuple[CoordinatorState, dict[str, PartitionState]]]:
    """Re-run a decoded symbolic path (a BMC counterexample) on the explicit handlers; each explicit state
    must match the symbolic one on the encoded fields (``AssertionError`` naming the step otherwise)."""
    cs, parts = to_explicit(path[0][1], n)
    states = [(cs, parts)]
    for j in range(1, len(path)):
        action, expected = path[j]
        stepped = explicit_step(cs, parts, action, params[j], protocol, n)
        if stepped is None:
            raise AssertionError(f"step {j} ({action} {params[j]}) is not enabled in the explicit spec")
        cs, parts = stepped
        got = from_explicit(cs, parts, n)
        diff = {k: (v, expected[k]) for k, v in got.items() if expected[k] != v}
        if diff:
            raise AssertionError(f"step {j} ({action} {params[j]}): explicit vs symbolic differ on {diff}")
        states.append((cs, parts))
    return states
