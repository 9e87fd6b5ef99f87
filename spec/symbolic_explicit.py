"""Between the z3 twin and the explicit spec: values to states and back, and a symbolic path replayed.

Models
    :func:`to_explicit` builds the explicit :class:`~txnspec.spec.coordinator_state.CoordinatorState` and partition
    states from a frame's values, :func:`from_explicit` encodes them back (:data:`ENCODED_FIELDS`);
    :func:`explicit_step` runs one symbolic action's explicit handler and :func:`replay_explicit` a whole BMC
    counterexample, so that ``tests/symbolic/test_agreement.py`` can compare both successors and ``txnspec prove``
    can confirm a counterexample on the explicit spec. :func:`describe_path` prints a path.

Kafka sources followed
    None directly: the explicit handlers (:mod:`txnspec.spec.coordinator`, :mod:`txnspec.spec.partition`) cite them.

Assumptions
    The ghost variables have no explicit twin and are not encoded; a frame's partition list is ``PARTITIONS``.

Not modelled
    Actions the twin lacks (expiration, loading split at its read, groups): ``explicit_step`` returns None there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from txnspec.spec.coordinator_state import CoordinatorState, PendingCompletion, TxnMetadata, TxnTransit
from txnspec.spec.messages import TransactionResult
from txnspec.spec.partition import BatchMetadata, PartitionState, ProducerStateEntry
from txnspec.spec.symbolic_vars import COORDINATOR_VARS, PARTITION_VARS, PARTITIONS, TID, TIMEOUT_MS, pvar
from txnspec.spec.txn_metadata import prepare_complete
from txnspec.spec.txn_state import TxnState

_STATE_BY_NAME = {s.value: s for s in TxnState}


def to_explicit(values: dict[str, Any], n: int = 2) -> tuple[CoordinatorState, dict[str, PartitionState]]:
    """The explicit coordinator and partition states a decoded symbolic state stands for (``now_ms`` 0)."""
    state = _STATE_BY_NAME[str(values["state"])]
    tv = 2 if values["tv2"] else 0
    cs = CoordinatorState(coordinator_epoch=values["coordinator_epoch"], next_producer_id=values["next_producer_id"])
    pid = values["producer_id"]
    if values["exists"]:
        parts = frozenset(PARTITIONS[i] for i in range(n) if values[pvar("part", i)])
        logged = frozenset(PARTITIONS[i] for i in range(n) if values[pvar("logged_part", i)])
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
            return values[pvar(x, i)]
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
            out[pvar("part", i)] = name in md.partitions
            out[pvar("logged_part", i)] = name in logged
        out.update({pvar("entry_epoch", i): entry.producer_epoch,
                    pvar("entry_coordinator_epoch", i): entry.coordinator_epoch,
                    pvar("last_first_seq", i): last.first_seq if last else -1,
                    pvar("last_seq", i): last.last_seq if last else -1,
                    pvar("txn_first_offset", i): entry.current_txn_first_offset,
                    pvar("log_end_offset", i): ps.log_end_offset})
    return out


ENCODED_FIELDS: tuple[str, ...] = (*COORDINATOR_VARS, *(pvar(x, i) for i in range(2) for x in PARTITION_VARS))


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
