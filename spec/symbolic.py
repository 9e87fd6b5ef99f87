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

Modules
    This module builds the model (:func:`build`); its variables and shared helpers are
    :mod:`txnspec.spec.symbolic_vars`, its transitions :mod:`txnspec.spec.symbolic_transitions`, the properties
    proved (each with the strengthening invariants it needs, the ``PROOFS`` table)
    :mod:`txnspec.spec.symbolic_properties`, and the way to and from the explicit spec (values to states, a path
    replayed on the explicit handlers) :mod:`txnspec.spec.symbolic_explicit`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3

from txnspec.checker.symbolic import SymbolicModel, Vars, decode_frame
from txnspec.spec.symbolic_transitions import (
    add_partitions,
    end_txn,
    failover,
    init_producer_id,
    produce,
    timeout,
    write_txn_markers,
)
from txnspec.spec.symbolic_vars import EMPTY, PARTITIONS, STATE_NAMES, pvar, variables_for
from txnspec.spec.txn_state import STATE_IDS

BUGS = ("zombie-not-fenced", "no-duplicate-detection")


def _init(n: int) -> Callable[[Vars], Any]:
    def init(s: Vars) -> Any:
        eqs = [z3.Not(s["exists"]), s["state"] == EMPTY, s["producer_id"] == -1, s["next_producer_id"] == 0,
               s["producer_epoch"] == -1, s["last_producer_epoch"] == -1, z3.Not(s["tv2"]),
               s["coordinator_epoch"] == 0, z3.Not(s["illegal"]), z3.Not(s["fenced_commit"]), s["txn_epoch"] == -1]
        for i in range(n):
            for x in ("part", "logged_part", "regress", "gap", "fenced_txn", "bad_commit"):
                eqs.append(z3.Not(s[pvar(x, i)]))
            for x in ("entry_epoch", "entry_coordinator_epoch", "last_first_seq", "last_seq", "txn_first_offset",
                      "hi_epoch", "hi_seq"):
                eqs.append(s[pvar(x, i)] == -1)
            eqs.append(s[pvar("log_end_offset", i)] == 0)
        return z3.And(*eqs)
    return init


def decode(model: z3.ModelRef, frame: Vars) -> dict[str, Any]:
    """A z3 model's values for one frame: ints, bools, and the coordinator state by Kafka's name."""
    values = decode_frame(model, frame)
    values["state"] = STATE_NAMES.get(values["state"], str(values["state"]))
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
        init_producer_id(n), add_partitions(n), end_txn(n, buggy == "zombie-not-fenced"), write_txn_markers(n),
        produce(n, detect_duplicates=not no_dup, validate_sequence=not no_dup), timeout(n), failover(n),
    ]
    return SymbolicModel(variables_for(n), _init(n), transitions, decode, _domain)
