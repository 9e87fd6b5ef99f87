"""The z3 twin's properties: the invariants, the strengthening invariants, and which proof needs which.

Models
    :func:`invariants` (the safety properties of the explicit spec that the twin covers, with their names),
    :func:`strengthening` (the helpers that make each inductive) and :data:`PROOFS`, each property with the
    helpers it needs and why; :func:`proofs` pairs them for ``txnspec prove`` (``checker.symbolic``'s BMC and
    k-induction).

Kafka sources followed
    The guarantees of KIP-98 (idempotence, transactions) and KIP-890 (fenced appends never commit), as the
    explicit spec's properties (:mod:`txnspec.spec.properties`) state them.

Assumptions
    The last stable offset is ``txn_first_offset`` while a transaction is open, the log end otherwise (the high
    watermark follows the log end).

Not modelled
    Liveness; properties over the consumer group, the aborted-transaction index or fetches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from txnspec.checker.symbolic import Invariant, StepInvariant, Vars
from txnspec.spec.symbolic_vars import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    STATE,
    in_states,
    pvar,
)
from txnspec.spec.txn_state import TxnState


def _all(n: int, f: Callable[[int], Any]) -> Any:
    return z3.And(*(f(i) for i in range(n)))


def last_stable_offset(s: Vars, i: int) -> Any:
    """``PartitionState.last_stable_offset`` with the high watermark at the log end: the first offset of the
    open transaction, else the log end offset (one producer id per leader here)."""
    first = s[pvar("txn_first_offset", i)]
    return z3.If(first != -1, first, s[pvar("log_end_offset", i)])


def invariants(n: int = 2) -> dict[str, Invariant | StepInvariant]:
    """The properties, named as the explicit spec's (``spec/properties.py``) where one exists."""
    def pv(s: Vars, x: str, i: int) -> Any:
        return s[pvar(x, i)]

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
                z3.Implies(c["state"] == PREPARE_COMMIT, in_states(nx["state"], PREPARE_COMMIT, COMPLETE_COMMIT)),
                z3.Implies(c["state"] == PREPARE_ABORT, in_states(nx["state"], PREPARE_ABORT, COMPLETE_ABORT))),
            "A PrepareCommit is followed only by CompleteCommit, a PrepareAbort only by CompleteAbort."),
    }


def strengthening(n: int = 2) -> dict[str, Invariant]:
    """Auxiliary invariants; each is proved along with the property that needs it."""
    def pv(s: Vars, x: str, i: int) -> Any:
        return s[pvar(x, i)]

    def idle(s: Vars) -> Any:
        return in_states(s["state"], EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)

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
        "no_unreachable_state": Invariant("no_unreachable_state", lambda s: z3.Not(in_states(
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
            z3.And(s["exists"], pv(s, "part", i), in_states(s["state"], ONGOING, PREPARE_COMMIT, PREPARE_ABORT)))),
            "A transaction open on a leader is in the coordinator's transaction, which is Ongoing or Prepare*."),
        "ongoing_at_txn_epoch": Invariant("ongoing_at_txn_epoch", lambda s: z3.Implies(
            s["state"] == ONGOING, s["txn_epoch"] == s["producer_epoch"]),
            "An Ongoing transaction runs at the coordinator's current epoch."),
        "open_txn_epoch": Invariant("open_txn_epoch", lambda s: _all(n, lambda i: z3.Implies(
            z3.And(pv(s, "txn_first_offset", i) != -1, in_states(s["state"], ONGOING, PREPARE_COMMIT)),
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
