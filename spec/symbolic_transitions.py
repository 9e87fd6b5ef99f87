"""The z3 twin's transitions: one per request or system step, named as the explicit spec's handlers.

Models
    ``InitProducerId`` (``handle_init_producer_id``), ``AddPartitionsToTxn`` (``handle_add_partitions_to_txn``),
    ``EndTxn`` (``handle_end_txn``, TV1 and TV2 paths), ``WriteTxnMarkers`` (``append_end_txn_marker`` on one
    partition and ``handle_write_txn_markers_response``: the last one writes Complete*), ``Produce`` (the leader's
    verification then ``append_data``), ``timeout`` (``abort_timed_out_transaction``) and ``failover``
    (``coordinator_failover``). Requests of the client and of zombie instances are nondeterministic parameters
    (any producer id, epoch, sequence, record count).

Kafka sources followed (trunk, 4.x)
    ``core/.../transaction/TransactionCoordinator.scala`` (``handleInitProducerId``,
    ``handleAddPartitionsToTransaction``, ``endTransaction``, ``endTransactionWithTV1``,
    ``abortTimedOutTransactions``), ``TransactionStateManager.scala`` (the load after a failover),
    ``storage/.../ProducerAppendInfo.java`` (``checkProducerEpoch``, ``checkSequence``, ``appendEndTxnMarker``).

Assumptions
    As :mod:`txnspec.spec.symbolic` lists them: one atomic step per request, coordinator appends never fail, the
    leader keeps the last batch only, TV1 verification of a transactional produce, the coordinator at TV2 for its
    own aborts, a marker the leader rejects is not a step.

Not modelled
    Dead, producer-id rotation, sequence wrap, fetches, replication, groups, clocks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import z3

from txnspec.checker.symbolic import Transition, Vars
from txnspec.spec.symbolic_vars import (
    BOOL,
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    INT,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    CoordVars,
    abort_empty,
    assign_coord,
    choose_coord,
    coord_modifies,
    current_coord,
    fence_and_abort,
    in_states,
    prepare_state,
    pvar,
    valid_transition,
)
from txnspec.spec.txn_state import TxnState


def init_producer_id(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.If(p["expected"], z3.And(p["pid"] >= 0, p["epoch"] >= 0), z3.BoolVal(True))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        cur = current_coord(c, n)
        no_parts = tuple(z3.BoolVal(False) for _ in range(n))
        created = replace(cur, exists=z3.BoolVal(True), state=EMPTY, producer_id=c["next_producer_id"],
                          epoch=z3.IntVal(-1), last=z3.IntVal(-1), tv2=z3.BoolVal(False), parts=no_parts,
                          logged=no_parts)
        md = choose_coord(c["exists"], cur, created)
        alloc = z3.If(c["exists"], c["next_producer_id"], c["next_producer_id"] + 1)
        md = replace(md, next_producer_id=alloc)
        fenced = z3.And(p["expected"], md.epoch != -1, p["pid"] != md.producer_id)
        fail = z3.Or(prepare_state(md.state), fenced)
        fence = fence_and_abort(md)
        # prepareIncrementProducerEpoch
        bump = z3.Or(z3.Not(p["expected"]), md.epoch == -1, p["epoch"] == md.epoch)
        retry = z3.And(p["expected"], p["epoch"] == md.last)
        bumped = replace(md, state=EMPTY, epoch=z3.If(bump, md.epoch + 1, md.epoch),
                         last=z3.If(bump, z3.If(p["expected"], md.epoch, -1), md.last),
                         parts=no_parts, logged=no_parts,
                         illegal=z3.Or(md.illegal, z3.Not(valid_transition(md.state, TxnState.EMPTY))))
        idle = in_states(md.state, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
        illegal = replace(md, illegal=z3.BoolVal(True))  # Dead, PrepareEpochFence: Kafka throws
        settled = choose_coord(idle, choose_coord(z3.Or(bump, retry), bumped, md), illegal)
        out = choose_coord(fail, md, choose_coord(md.state == ONGOING, fence, settled))
        return assign_coord(nx, out, n)

    return Transition("InitProducerId", guard, update, coord_modifies(n),
                      {"expected": BOOL, "pid": INT, "epoch": INT})


def add_partitions(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.And(p["epoch"] >= 0, z3.Or(*(p[f"add{i}"] for i in range(n))))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        md = current_coord(c, n)
        add = [p[f"add{i}"] for i in range(n)]
        subset = z3.And(*(z3.Implies(add[i], md.parts[i]) for i in range(n)))
        ok = z3.And(md.exists, z3.Not(prepare_state(md.state)), md.producer_id == p["pid"], md.epoch == p["epoch"],
                    z3.Not(z3.And(md.state == ONGOING, subset)))
        parts = tuple(z3.Or(md.parts[i], add[i]) for i in range(n))
        added = replace(md, state=ONGOING, parts=parts, logged=parts, tv2=p["tv2"], txn_epoch=md.epoch,
                        illegal=z3.Or(md.illegal, z3.Not(valid_transition(md.state, TxnState.ONGOING))))
        return assign_coord(nx, choose_coord(ok, added, md), n)

    params: dict[str, z3.SortRef] = {"pid": INT, "epoch": INT, "tv2": BOOL, **{f"add{i}": BOOL for i in range(n)}}
    return Transition("AddPartitionsToTxn", guard, update, coord_modifies(n), params)


def end_txn(n: int, zombie_not_fenced: bool) -> Transition:
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        md = current_coord(c, n)
        commit = p["commit"]
        epoch = p["epoch"]
        if zombie_not_fenced:  # the bug: the coordinator takes the epoch from its metadata
            epoch = z3.If(md.producer_id == p["pid"], md.epoch, p["epoch"])
        base = z3.And(md.exists, z3.Not(prepare_state(md.state)), md.producer_id == p["pid"])
        target = z3.If(commit, PREPARE_COMMIT, PREPARE_ABORT)
        valid_target = z3.If(commit, valid_transition(md.state, TxnState.PREPARE_COMMIT),
                             valid_transition(md.state, TxnState.PREPARE_ABORT))

        def prepared(new_epoch: Any, new_last: Any, tv2: Any) -> CoordVars:
            out = replace(md, state=target, epoch=new_epoch, last=new_last, tv2=tv2, logged=md.parts,
                          illegal=z3.Or(md.illegal, z3.Not(valid_target)))
            return replace(out, fenced_commit=z3.Or(md.fenced_commit, z3.And(commit, p["epoch"] < md.epoch)))

        # TV2 (_decide_end_txn_v2): Prepare* is pending, so only Ongoing, Complete* and Empty act
        retry = md.epoch == epoch + 1
        complete = in_states(md.state, COMPLETE_COMMIT, COMPLETE_ABORT)
        valid_epoch = z3.If(complete, z3.Or(retry, epoch == md.epoch), epoch == md.epoch)
        v2_ongoing = prepared(md.epoch + 1, md.epoch, z3.BoolVal(True))
        v2_abort_again = z3.And(z3.Not(commit), z3.Not(retry),
                                in_states(md.state, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT))
        v2 = choose_coord(z3.And(base, valid_epoch, md.state == ONGOING), v2_ongoing,
                          choose_coord(z3.And(base, valid_epoch, v2_abort_again), abort_empty(md), md))
        # TV1 (_decide_end_txn_v1): strict epoch; only Ongoing acts
        v1 = choose_coord(z3.And(base, epoch == md.epoch, md.state == ONGOING),
                          prepared(md.epoch, md.last, z3.BoolVal(False)), md)
        return assign_coord(nx, choose_coord(p["tv2"], v2, v1), n)

    return Transition("EndTxn", lambda c, p: p["epoch"] >= 0, update, coord_modifies(n),
                      {"pid": INT, "epoch": INT, "commit": BOOL, "tv2": BOOL})


def marker_accepted(c: Vars, i: int) -> Any:
    """``append_end_txn_marker``'s checks for the marker the coordinator sends now to partition ``i``."""
    e, pe = c["producer_epoch"], c[pvar("entry_epoch", i)]
    retry = z3.And(e == pe, c[pvar("txn_first_offset", i)] == -1)
    epoch_ok = z3.If(c["tv2"], z3.Not(z3.And(e <= pe, z3.Not(retry))), e >= pe)
    return z3.And(epoch_ok, z3.Not(c[pvar("entry_coordinator_epoch", i)] > c["coordinator_epoch"]))


def write_txn_markers(n: int) -> Transition:
    def guard(c: Vars, p: Vars) -> Any:
        return z3.And(c["exists"], prepare_state(c["state"]), z3.Or(*(
            z3.And(p["partition"] == i, c[pvar("part", i)], marker_accepted(c, i)) for i in range(n))))

    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        commit = c["state"] == PREPARE_COMMIT
        e, ce = c["producer_epoch"], c["coordinator_epoch"]
        eqs = []
        for i in range(n):
            def pv(x: str, i: int = i) -> Any:
                return c[pvar(x, i)]

            def nv(x: str, i: int = i) -> Any:
                return nx[pvar(x, i)]
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
        last = z3.And(*(z3.Or(p["partition"] == i, z3.Not(c[pvar("part", i)])) for i in range(n)))
        done = z3.If(commit, COMPLETE_COMMIT, COMPLETE_ABORT)
        eqs.append(nx["state"] == z3.If(last, done, c["state"]))
        eqs += [nx[pvar("logged_part", i)] == z3.If(last, False, c[pvar("logged_part", i)]) for i in range(n)]
        return z3.And(*eqs)

    modifies = ("state", *(pvar(x, i) for i in range(n) for x in (
        "entry_epoch", "entry_coordinator_epoch", "last_first_seq", "last_seq", "txn_first_offset",
        "log_end_offset", "part", "logged_part", "fenced_txn", "bad_commit")))
    return Transition("WriteTxnMarkers", guard, update, modifies, {"partition": INT})


def produce(n: int, detect_duplicates: bool, validate_sequence: bool) -> Transition:
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
                return c[pvar(x, i)]

            def nv(x: str, i: int = i) -> Any:
                return nx[pvar(x, i)]
            pe, is_open = pv("entry_epoch"), pv("txn_first_offset") != -1
            verified = z3.Or(z3.Not(txn), z3.And(is_open, pe == e),  # system._verify_transactional_produce
                             z3.And(z3.Not(prepare_state(c["state"])), pv("part"), c["producer_epoch"] == e))
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

    modifies = tuple(pvar(x, i) for i in range(n) for x in (
        "entry_epoch", "last_first_seq", "last_seq", "txn_first_offset", "log_end_offset", "hi_epoch", "hi_seq",
        "regress", "gap", "fenced_txn"))
    return Transition("Produce", guard, update, modifies,
                      {"partition": INT, "epoch": INT, "first_seq": INT, "count": INT, "transactional": BOOL})


def timeout(n: int) -> Transition:
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        return assign_coord(nx, fence_and_abort(current_coord(c, n)), n)
    return Transition("timeout", lambda c, p: z3.And(c["exists"], c["state"] == ONGOING), update, coord_modifies(n))


def failover(n: int) -> Transition:
    """``coordinator_failover``: coordinator epoch + 1; the cache is reloaded from the last log record
    (its partitions, ``last_producer_epoch`` -1); a Prepare* re-sends markers to all its partitions."""
    def update(c: Vars, nx: Vars, p: Vars) -> Any:
        eqs = [nx["coordinator_epoch"] == c["coordinator_epoch"] + 1,
               nx["last_producer_epoch"] == z3.If(c["exists"], -1, c["last_producer_epoch"])]
        eqs += [nx[pvar("part", i)] == c[pvar("logged_part", i)] for i in range(n)]
        return z3.And(*eqs)
    return Transition("failover", lambda c, p: z3.BoolVal(True), update,
                      ("coordinator_epoch", "last_producer_epoch", *(pvar("part", i) for i in range(n))))
