"""The z3 twin's variables: one transactional id's coordinator metadata, two partition leaders, the ghosts.

Models
    The variables of :mod:`txnspec.spec.symbolic` (:data:`COORDINATOR_VARS`, :data:`PARTITION_VARS` per partition,
    :data:`GHOST_VARS`, :data:`PARTITION_GHOSTS`), the coordinator's states as z3 integers (:data:`STATE`, Kafka's
    ``TransactionState`` ids), and the helpers the transitions share over the coordinator's metadata: the table
    check of ``prepareTransitionTo`` (:func:`valid_transition`), reading, choosing and assigning the metadata
    (:class:`CoordVars`), Prepare* with its epoch, an abort of an empty transaction, the fence and abort.

Kafka sources followed (trunk, 4.x)
    ``transaction-coordinator/.../TransactionState.java`` (ids, ``validPreviousStates``),
    ``TransactionMetadata.java`` (``prepareAbortOrCommit``, ``prepareFenceProducerEpoch``).

Assumptions
    Epochs, sequences and offsets are unbounded integers; one producer id (no rotation), ``next_producer_id`` -1.

Not modelled
    See :mod:`txnspec.spec.symbolic`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import z3

from txnspec.checker.symbolic import Vars
from txnspec.spec.txn_state import STATE_IDS, VALID_PREVIOUS_STATES, TxnState

TID = "txn"


PARTITIONS = ("p0", "p1")


TIMEOUT_MS = 60_000


# The state is an Int holding Kafka's TransactionStatus id (STATE_IDS): linear integer arithmetic only,
# which z3 solves much faster than a datatype in deep unrollings.
_STATE_SORT = z3.IntSort()


STATE = {s: z3.IntVal(STATE_IDS[s]) for s in TxnState}


STATE_NAMES = {STATE_IDS[s]: s.value for s in TxnState}


EMPTY, ONGOING = STATE[TxnState.EMPTY], STATE[TxnState.ONGOING]


PREPARE_COMMIT, PREPARE_ABORT = STATE[TxnState.PREPARE_COMMIT], STATE[TxnState.PREPARE_ABORT]


COMPLETE_COMMIT, COMPLETE_ABORT = STATE[TxnState.COMPLETE_COMMIT], STATE[TxnState.COMPLETE_ABORT]



INT, BOOL = z3.IntSort(), z3.BoolSort()


def pvar(name: str, i: int) -> str:
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


def variables_for(n: int) -> dict[str, z3.SortRef]:
    out: dict[str, z3.SortRef] = {**COORDINATOR_VARS, **GHOST_VARS}
    for i in range(n):
        for name, sort in {**PARTITION_VARS, **PARTITION_GHOSTS}.items():
            out[pvar(name, i)] = sort
    return out


def valid_transition(src: Any, target: TxnState) -> Any:
    """``src`` is in Kafka's valid-previous-states table for ``target`` (``TransactionState``)."""
    return z3.Or(*(src == STATE[s] for s in VALID_PREVIOUS_STATES[target]))


def in_states(src: Any, *states: Any) -> Any:
    return z3.Or(*(src == s for s in states))


@dataclass(frozen=True)
class CoordVars:
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


def current_coord(c: Vars, n: int) -> CoordVars:
    return CoordVars(c["exists"], c["state"], c["producer_id"], c["next_producer_id"], c["producer_epoch"],
                     c["last_producer_epoch"], c["tv2"], tuple(c[pvar("part", i)] for i in range(n)),
                     tuple(c[pvar("logged_part", i)] for i in range(n)), c["illegal"], c["fenced_commit"],
                     c["txn_epoch"])


def choose_coord(cond: Any, a: CoordVars, b: CoordVars) -> CoordVars:
    def pick(x: Any, y: Any) -> Any:
        return z3.If(cond, x, y)
    return CoordVars(pick(a.exists, b.exists), pick(a.state, b.state), pick(a.producer_id, b.producer_id),
                     pick(a.next_producer_id, b.next_producer_id), pick(a.epoch, b.epoch), pick(a.last, b.last),
                     pick(a.tv2, b.tv2), tuple(pick(x, y) for x, y in zip(a.parts, b.parts, strict=True)),
                     tuple(pick(x, y) for x, y in zip(a.logged, b.logged, strict=True)), pick(a.illegal, b.illegal),
                     pick(a.fenced_commit, b.fenced_commit), pick(a.txn_epoch, b.txn_epoch))


def assign_coord(nx: Vars, v: CoordVars, n: int) -> Any:
    eqs = [nx["exists"] == v.exists, nx["state"] == v.state, nx["producer_id"] == v.producer_id,
           nx["next_producer_id"] == v.next_producer_id, nx["producer_epoch"] == v.epoch,
           nx["last_producer_epoch"] == v.last, nx["tv2"] == v.tv2, nx["illegal"] == v.illegal,
           nx["fenced_commit"] == v.fenced_commit, nx["txn_epoch"] == v.txn_epoch]
    for i in range(n):
        eqs += [nx[pvar("part", i)] == v.parts[i], nx[pvar("logged_part", i)] == v.logged[i]]
    return z3.And(*eqs)


def coord_modifies(n: int) -> tuple[str, ...]:
    return (*_COORD_MODIFIES, *(pvar(x, i) for i in range(n) for x in ("part", "logged_part")))


def prepare_coord(md: CoordVars, target: Any, target_state: TxnState, *, epoch: Any, last: Any, tv2: Any) -> CoordVars:
    """``prepareAbortOrCommit`` + log append + completion, then ``prepareComplete`` (markers pending)."""
    return replace(md, state=target, epoch=epoch, last=last, tv2=tv2, logged=md.parts,
                   illegal=z3.Or(md.illegal, z3.Not(valid_transition(md.state, target_state))))


def abort_empty(md: CoordVars) -> CoordVars:
    """TV2 abort with no partitions: PrepareAbort with epoch + 1, completed at once (no markers)."""
    no_parts = tuple(z3.BoolVal(False) for _ in md.parts)
    return replace(md, state=COMPLETE_ABORT, epoch=md.epoch + 1, last=md.epoch, tv2=z3.BoolVal(True),
                   parts=no_parts, logged=no_parts,
                   illegal=z3.Or(md.illegal, z3.Not(valid_transition(md.state, TxnState.PREPARE_ABORT))))


def fence_and_abort(md: CoordVars) -> CoordVars:
    """``prepareFenceProducerEpoch`` then the coordinator's own TV2 abort: PrepareAbort at epoch + 1."""
    valid = z3.And(valid_transition(md.state, TxnState.PREPARE_EPOCH_FENCE),
                   valid_transition(md.state, TxnState.PREPARE_ABORT))
    return replace(md, state=PREPARE_ABORT, epoch=md.epoch + 1, last=md.epoch, tv2=z3.BoolVal(True),
                   logged=md.parts, illegal=z3.Or(md.illegal, z3.Not(valid)))


def prepare_state(s: Any) -> Any:
    return in_states(s, PREPARE_COMMIT, PREPARE_ABORT)
